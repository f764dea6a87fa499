/* conformance_fixtures.h - the tools, resources and prompts that the MCP
 * conformance suite (@modelcontextprotocol/conformance) calls on the
 * server it tests, registered on the protocol layer through its extension
 * points (SBX_MCP_TOOL_CONTENT, sbx_mcp_session_log,
 * sbx_mcp_session_progress, sbx_mcp_elicit, struct sbx_mcp_provider).
 * For tests only: mcp_conformance_server and the unit tests. */
#ifndef TESTS_MCP_CONFORMANCE_FIXTURES_H
#define TESTS_MCP_CONFORMANCE_FIXTURES_H

#include "mcp_server.h"

/* test_simple_text, test_image_content, ..., json_schema_2020_12_tool;
 * no test_sampling: the protocol layer never asks the client's model. */
extern const struct sbx_mcp_tool conformance_tools[];
extern const size_t conformance_ntools;

/* test://static-text, test://static-binary, test://watched-resource (may
 * be subscribed to), the template test://template/{id}/data, and the
 * prompts test_simple_prompt, test_prompt_with_arguments (arg1 and arg2
 * complete from a fixed list), test_prompt_with_embedded_resource,
 * test_prompt_with_image. */
extern const struct sbx_mcp_provider conformance_provider;

/* The base64 of the fixtures' 1x1 PNG image. */
extern const char conformance_png[];

#endif
