/* fake_ops.h - test-only sandbox operations for the MCP protocol tests: an
 * in-memory set of sandboxes that keeps what was written to them, so a
 * client can see its write_file come back in read_file. */
#ifndef TESTS_MCP_FAKE_OPS_H
#define TESTS_MCP_FAKE_OPS_H

#include "mcp_server.h"

/* Every operation, bound to the fakes below. */
extern const struct sbx_mcp_ops fake_ops;

/* The arguments of the last operation called (a copy), and how many calls
 * there were.  fake_reset() forgets everything. */
extern json_t *fake_last_args;
extern int fake_calls;
void fake_reset(void);

/* A test-only tool that elicits (sbx_mcp_elicit): test_confirm
 * {question, timeout_ms} -> {action, content}. */
extern const struct sbx_mcp_tool fake_confirm_tool;

/* A progress_set for struct sbx_mcp_config: fake exec reports a step
 * "run" (start, tick, end) to the function set here. */
void fake_progress_set(struct sbx *s, sbx_progress_fn fn, void *arg);

#endif
