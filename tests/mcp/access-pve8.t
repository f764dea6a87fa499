#!/usr/bin/env bash
# tests/mcp/access-pve8.t - tests/mcp/access.t against the Proxmox simulator of
# the PVE 8.4 schema (access.t itself runs against 9.1's).
export MCP_PVE_VERSION=8
exec bash "$TOP/tests/mcp/access.t" "$@"
