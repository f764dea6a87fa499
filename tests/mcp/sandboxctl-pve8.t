#!/usr/bin/env bash
# tests/mcp/sandboxctl-pve8.t - tests/mcp/sandboxctl.t against the Proxmox simulator of
# the PVE 8.4 schema (sandboxctl.t itself runs against 9.1's).
export MCP_PVE_VERSION=8
exec bash "$TOP/tests/mcp/sandboxctl.t" "$@"
