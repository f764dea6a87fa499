#!/usr/bin/env bash
# tests/sandboxctl/hostile-agent.t - a guest agent that lies (the
# simulator's /_sim/hostile, tests/pve-sim/hostile.py), against exec, read
# and write.  Each case arms one lie for sandbox h1 and runs sandboxctl
# under /usr/bin/time -v: what it printed, its exit status, its peak memory
# (bounded), while `exec` on sandbox o1 runs beside it and must succeed
# with its own output.  Then the same through the MCP server over HTTP: a
# call on h1 stuck on a dripping or endless agent, and another session's
# call on o1 answered while it is. On PVE 9.1 (all) and 8.4 (file-read,
# whose decoding differs, and the exec-status decoding).
set -u
. "$TOP/tests/sandboxctl/lib.sh"

HTTP_TIMEOUT_S=3
# Peak RSS allowed of one sandboxctl: the answer cap of pve.c (128 MiB,
# doubled while it grows) and the parsed answer; with no cap a 2 GiB answer
# would take gigabytes.
MEM_MAX_KB=$((512 * 1024))
# Under AddressSanitizer, freed memory waits in its quarantine (256 MiB by
# default) before it is reused: the tool's memory, not sandboxctl's.
MEASURED_ASAN=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8

# hostile_case V CALL KIND BYTES WANT_RC WANT_TEXT ARGS...: arm the lie, run
# sandboxctl ARGS (stdout in $T/out), and check rc, stderr, peak memory and
# the parallel exec on o1.
hostile_case() {
    local v=$1 call=$2 kind=$3 bytes=$4 want_rc=$5 want=$6 pid rc peak par par_rc err
    shift 6
    pve_sim_ctl DELETE hostile >/dev/null
    pve_sim_ctl POST hostile "{\"vmid\":$H_VMID,\"call\":\"$call\",\"kind\":\"$kind\",\"bytes\":$bytes}" \
        >"$T/arm" || echo "# arming $call $kind failed: $(cat "$T/arm")"
    ASAN_OPTIONS=$MEASURED_ASAN /usr/bin/time -v -o "$T/time" "$SBX_BIN" -c "$CONF" "$@" \
        >"$T/out" 2>"$T/err" </dev/null &
    pid=$!
    par=$(sbx exec o1 -- echo "other-ok-$kind" 2>&1)
    par_rc=$?
    wait "$pid"
    rc=$?
    pve_sim_ctl DELETE hostile >/dev/null
    peak=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$T/time")
    err=$(grep -v '^[[:space:]]*Command' "$T/err" | head -c 600)
    # no text wanted: nothing on stderr
    ok "$([ "$rc" = "$want_rc" ] && { [ -n "$want" ] || [ ! -s "$T/err" ]; } &&
        grep -qF -- "$want" <(echo; cat "$T/err"); echo $?)" \
        "PVE $v: $call $kind: sandboxctl $1 exits $want_rc, saying '$want' (rc $rc: $(tr '\n' ' ' <<<"$err" | cat -v))"
    ok "$(LC_ALL=C grep -qP '[\x00-\x09\x0b-\x1f\x7f]|Sanitizer|runtime error:' "$T/err"; [ $? = 1 ]; echo $?)" \
        "PVE $v: $call $kind: stderr holds no control byte, no sanitizer report"
    ok "$([ -n "$peak" ] && [ "$peak" -le "$MEM_MAX_KB" ]; echo $?)" \
        "PVE $v: $call $kind: peak memory ${peak:-?} KiB <= $MEM_MAX_KB KiB"
    echo "# PVE $v: $call $kind: peak RSS ${peak:-?} KiB, $(sed -n 's/^.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$T/time") wall"
    ok "$([ "$par_rc" = 0 ] && [ "$par" = "other-ok-$kind" ]; echo $?)" \
        "PVE $v: $call $kind: exec on o1 meanwhile succeeds with its own output (rc $par_rc: ${par:0:200})"
}

cli_cases() {
    local v=$1 big=$((20 * 1024 * 1024))
    # exec-status
    hostile_case "$v" exec-status wrong_types 0 1 \
        "sandbox h1: agent/exec-status: 'exited' is a string, not a boolean" exec h1 -- true
    hostile_case "$v" exec-status huge_output 0 1 "agent/exec-status: answer larger than" \
        exec h1 -- true
    hostile_case "$v" exec-status huge_output "$big" 0 "exec: stdout was truncated" exec h1 -- true
    check "PVE $v: exec-status of 20 MiB of output: stdout is exec-output-max (1 MiB), all 'A'" \
        test "$(head -c 2000000 "$T/out" | tr -d A | wc -c) $(wc -c <"$T/out")" = "0 1048576"
    [ "$v" = 8 ] && return
    hostile_case "$v" exec-status never_exits 0 1 \
        "sandbox h1: agent/exec-status: pid" exec h1 --timeout 1 -- true
    check "PVE $v: ... and gives up after the command's timeout, the kill grace and one http-timeout" \
        grep -q "still running after $((1 + 5 + HTTP_TIMEOUT_S)) s" "$T/err"
    hostile_case "$v" exec-status drip 0 1 \
        "sandbox h1: agent/exec-status: no answer within $HTTP_TIMEOUT_S.0 s" exec h1 -- true
    hostile_case "$v" exec-status missing_exited 0 1 "Result verification failed" exec h1 -- true
    hostile_case "$v" exec-status bad_json 0 1 "malformed JSON string" exec h1 -- true
    check "PVE $v: ... the agent's escape sequence reached stderr as '?' only" \
        grep -qF '??[2J?]0;pwned' "$T/err"
    hostile_case "$v" exec-status not_json 0 1 "agent/exec-status: the answer is null, not an object" \
        exec h1 -- true
    # another request's answer: the user sees it as this command's, and only here
    sbx exec h1 -- echo first-command >/dev/null
    hostile_case "$v" exec-status other_pid 0 0 "" exec h1 -- echo second-command
    check "PVE $v: exec-status answered for another pid: the output shown is that answer's, no other sandbox's" \
        test "$(cat "$T/out")" = first-command
    # exec
    hostile_case "$v" exec pid_string 0 1 "sandbox h1: agent/exec: the answer holds no pid ('pid' is a string)" \
        exec h1 -- true
    hostile_case "$v" exec bad_json 0 1 "malformed JSON string" exec h1 -- true
    # file-write
    hostile_case "$v" file-write drip 0 1 \
        "sandbox h1: agent/file-write: no answer within $HTTP_TIMEOUT_S.0 s" write h1 /root/w
    hostile_case "$v" file-write bad_json 0 1 "malformed JSON string" write h1 /root/w
}

read_cases() {
    local v=$1
    if [ "$v" = 9 ]; then
        # base64 content: an answer past a whole 16 MiB file's is not read
        hostile_case "$v" file-read more_than_asked 0 1 \
            "sandbox h1: read /root/f: GET /nodes/$H_NODE/qemu/$H_VMID/agent/file-read: answer larger than 22435160 bytes" \
            read h1 /root/f
    else
        hostile_case "$v" file-read more_than_asked 0 1 \
            "sandbox h1: read /root/f: agent/file-read: 'content' holds more than the 16777216 bytes asked for" \
            read h1 /root/f
        # the largest answer under the 128 MiB cap: the peak of memory
        hostile_case "$v" file-read more_than_asked $((95 * 1024 * 1024)) 1 \
            "'content' holds more than the 16777216 bytes asked for" read h1 /root/f
    fi
    hostile_case "$v" file-read huge 0 1 "agent/file-read: answer larger than" read h1 /root/f
    hostile_case "$v" file-read wrong_types 0 1 "agent/file-read: 'truncated' is a string, not a boolean" \
        read h1 /root/f
    hostile_case "$v" file-read count_lie 0 1 "agent/file-read: 'bytes-read' says 1011, 'content' holds 11 bytes" read h1 /root/f
    if [ "$v" = 9 ]; then
        hostile_case "$v" file-read bad_base64 0 1 "agent/file-read: 'content' is not base64" \
            read h1 /root/f
        hostile_case "$v" file-read drip 0 1 \
            "sandbox h1: read /root/f: agent/file-read: no answer within $HTTP_TIMEOUT_S.0 s" read h1 /root/f
        hostile_case "$v" file-read bad_json 0 1 "malformed JSON string" read h1 /root/f
    else
        # PVE 8 decodes the agent's base64 leniently: the guest's garbage
        # arrives as bytes, which read hands over as they are.
        hostile_case "$v" file-read bad_base64 0 0 "" read h1 /root/f
        check "PVE $v: ... the bytes read are the garbage, as Proxmox gave them" \
            test "$(od -An -tx1 "$T/out" | tr -d ' \n' | head -c 8)" = fffe1b5b
    fi
    # another file than the one asked for: stdout gets it, nothing else
    mkdir -p "$T/dest"
    hostile_case "$v" file-read other_file 0 0 "" read h1 /root/f
    cp "$T/out" "$T/dest/f"
    check "PVE $v: file-read of another file: what read printed is that file, written where asked only" \
        test "$(head -c 5 "$T/out"):$(ls -A "$T/dest")" = "root::f"
}

# tree_state DIR: every file under DIR with its size and digest.
tree_state() {
    (cd "$1" && find . -type f -exec sha256sum {} + | sort)
}

# pull_case V: pull from h1 while its agent answers the bundle's file-read
# with another file: the pull fails, and the host repository and
# sandboxctl's state dir hold what they held before.
pull_case() {
    local v=$1 H=$T/host before_repo before_state
    check "PVE $v: pull: the guest gets its user agent" sbx exec h1 -- useradd -m -s /bin/sh agent
    git init -q -b main "$H" && git -C "$H" config user.name host &&
        git -C "$H" config user.email host@example.org && echo one >"$H/README" &&
        git -C "$H" add -A && git -C "$H" commit -qm one
    check "PVE $v: pull: push h1 --repo host" sbx push h1 --repo "$H"
    before_repo=$(tree_state "$H")
    before_state=$(tree_state "$T/state")
    hostile_case "$v" file-read other_file 0 1 "copy out of the sandbox: " pull h1 --repo "$H"
    check "PVE $v: pull of another file than the bundle: the host repository is as it was" \
        test "$(tree_state "$H")" = "$before_repo"
    check "PVE $v: ... and sandboxctl's state dir too (its scratch dir removed)" \
        test "$(tree_state "$T/state")" = "$before_state"
}

# mcp_post SID ID METHOD PARAMS OUT: one JSON-RPC request over HTTP; the
# answer's JSON (the last data: line of an event stream) in OUT.
mcp_post() {
    local sid=$1 id=$2 method=$3 params=$4 out=$5
    curl -sS --noproxy '*' --max-time 60 -H "Authorization: Bearer $MCP_TOKEN" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        ${sid:+-H "Mcp-Session-Id: $sid"} -D "$out.h" -o "$out.raw" \
        -d "{\"jsonrpc\":\"2.0\",\"id\":$id,\"method\":\"$method\",\"params\":$params}" "$MCP_URL"
    sed -n 's/^data: //p' "$out.raw" | tail -n 1 >"$out"
    [ -s "$out" ] || cp "$out.raw" "$out"
}

mcp_session() {
    local out=$T/mcp-init-$1
    mcp_post "" 1 initialize '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}' "$out"
    sed -n 's/^mcp-session-id: *//Ip' "$out.h" | tr -d '\r' | head -n 1
}

# mcp_case V TOOL KIND CALL ARGS WANT: session A calls TOOL on h1 (stuck on
# the lie KIND of CALL); session B runs a command on o1 meanwhile.
mcp_case() {
    local v=$1 tool=$2 call=$3 kind=$4 args=$5 want=$6 pid b_rc alive
    pve_sim_ctl POST hostile "{\"vmid\":$H_VMID,\"call\":\"$call\",\"kind\":\"$kind\"}" >/dev/null
    mcp_post "$SID_A" 7 tools/call "{\"name\":\"$tool\",\"arguments\":$args}" "$T/mcp-a" &
    pid=$!
    sleep 0.5 # A's call is in the agent's hands (the drip takes 3 s)
    mcp_post "$SID_B" 8 tools/call '{"name":"run_command","arguments":{"name":"o1","command":["echo","mcp-other-ok"]}}' "$T/mcp-b"
    b_rc=$?
    kill -0 "$pid" 2>/dev/null
    alive=$?
    wait "$pid"
    pve_sim_ctl DELETE hostile >/dev/null
    ok "$([ $b_rc = 0 ] && [ "$(json_get "$(cat "$T/mcp-b")" 'j["result"]["structuredContent"]["stdout"] == "mcp-other-ok\n"')" = True ]; echo $?)" "PVE $v: MCP: run_command on o1 in another session succeeds ($(head -c 300 "$T/mcp-b"))"
    ok "$alive" "PVE $v: MCP: ... while $tool on h1 ($call $kind) was still waiting for its agent"
    ok "$(json_get "$(cat "$T/mcp-a")" 'j["result"]["isError"] is True and "'"$want"'" in j["result"]["content"][0]["text"]' | grep -qx True; echo $?)" \
        "PVE $v: MCP: $tool on h1 fails with '$want' ($(head -c 300 "$T/mcp-a" | cat -v))"
}

mcp_cases() {
    local v=$1 port
    MCP_TOKEN=mcp-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s\n' "$MCP_TOKEN" >"$T/mcp-token"
    chmod 600 "$T/mcp-token"
    sbx_write_config <<EOF
http-timeout ${HTTP_TIMEOUT_S}s
mcp-token-file $T/mcp-token
EOF
    "$SBX_BIN" -c "$CONF" mcp --http 127.0.0.1:0 --port-file "$T/mcp.port" --owner alice \
        2>"$T/mcp.err" &
    MCP_PID=$!
    for ((i = 0; i < 100; i++)); do
        [ -s "$T/mcp.port" ] && break
        sleep 0.05
    done
    port=$(cat "$T/mcp.port" 2>/dev/null)
    MCP_URL=http://127.0.0.1:$port/mcp
    SID_A=$(mcp_session a)
    SID_B=$(mcp_session b)
    ok "$([ ${#SID_A} = 32 ] && [ ${#SID_B} = 32 ]; echo $?)" "PVE $v: MCP server up, two sessions"
    mcp_case "$v" run_command exec-status drip '{"name":"h1","command":["true"]}' \
        "sandbox h1: agent/exec-status: no answer within $HTTP_TIMEOUT_S.0 s"
    mcp_case "$v" read_file file-read drip '{"name":"h1","path":"/root/f"}' \
        "sandbox h1: read /root/f: agent/file-read: no answer within $HTTP_TIMEOUT_S.0 s"
    kill -TERM "$MCP_PID"
    wait "$MCP_PID"
    ok $? "PVE $v: MCP server stops cleanly ($(grep -c . "$T/mcp.err") lines on stderr)"
    ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/mcp.err"
    ok $? "PVE $v: MCP server: no sanitizer report"
}

run_version() {
    local v=$1 out
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; sbx_stop_all quiet; return; }
    sbx_write_config <<<"http-timeout ${HTTP_TIMEOUT_S}s"
    out=$(sbx --json create --name h1 --size small --owner alice --policy balanced 2>&1)
    ok $? "PVE $v: create h1 (${out:0:120})"
    H_VMID=$(json_get "$out" 'j["vmid"]')
    H_NODE=$(json_get "$out" 'j["node"]')
    out=$(sbx --json create --name o1 --size small --owner alice --policy balanced 2>&1)
    ok $? "PVE $v: create o1 (${out:0:120})"
    printf 'file of h1\n' | sbx write h1 /root/f >/dev/null
    cli_cases "$v"
    read_cases "$v"
    check "PVE $v: with the lies gone, h1 answers truly again" test "$(sbx read h1 /root/f)" = "file of h1"
    if [ "$v" = 9 ]; then
        pull_case "$v"
        mcp_cases "$v"
    fi
    sbx_stop_all
}

run_version 9
run_version 8
tap_end
