#!/usr/bin/env bash
# tests/sandboxctl/git.t - push, pull and apply with real git against the
# Proxmox simulator (tests/pve-sim), on the PVE 8.4 and the 9.1 schema.
#
# A repository with history goes into a sandbox, a commit made there by the
# sandbox's user (agent, made with useradd in the guest: the simulator's
# guests have root only) comes back into refs/remotes/sandbox/NAME/ and is
# applied.  Then a hostile guest repository, case by case: each pull must
# leave the host repository's config, hooks, working tree and every ref
# outside refs/remotes/sandbox/ byte-identical, and the output must name
# what was refused or flagged.  The caps are small in this config
# (pull-max-bytes 1m, pull-max-blob-bytes 4m, pull-max-refs 50) so that a
# blob of 16 MiB and 60 refs stand for 2 GiB and 100 000.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# host_state: what must not change on the host (config, hooks, working
# tree, index, refs outside refs/remotes/sandbox/).
host_state() {
    (
        cd "$H" || exit 1
        cat .git/config
        find .git/hooks -type f -exec sha256sum {} + | sort
        git for-each-ref --format='%(refname) %(objectname)' | grep -v '^refs/remotes/sandbox/'
        git ls-files -s
        find . -path ./.git -prune -o -print0 | sort -z | xargs -0 ls -ld --time-style=+%s | awk '{print $1, $5, $6, $7}'
        find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum
    ) 2>&1
}

# in_guest SCRIPT: run SCRIPT in the guest as agent, in $GUEST_REPO.
in_guest() {
    sbx exec g1 -- runuser -u agent -- env HOME=/home/agent GIT_AUTHOR_NAME=agent \
        GIT_AUTHOR_EMAIL=agent@sandbox GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@sandbox \
        sh -c "cd $GUEST_REPO && $1"
}

# fresh CASE: push main again into a new guest path for one hostile case.
fresh() {
    GUEST_REPO=/home/agent/repos/$1
    sbx push g1 --repo "$H" --path "$GUEST_REPO" >"$T/push.out" 2>&1 ||
        { echo "# push for $1 failed: $(cat "$T/push.out")"; return 1; }
}

# hostile V CASE WHAT EXPECT: pull; it must exit as EXPECT says (refused:
# exit 1; taken: exit 0), print WHAT, and leave the host as it was.
hostile() {
    local v=$1 what=$2 expect=$3 pattern=$4 before rc
    before=$(host_state)
    sbx pull g1 --repo "$H" >"$T/pull.out" 2>&1
    rc=$?
    if [ "$expect" = refused ]; then
        ok "$([ $rc -eq 1 ] && grep -q -- "$pattern" "$T/pull.out"; echo $?)" \
            "PVE $v: $what: pull refuses, naming it ($(tr '\n' ' ' <"$T/pull.out" | head -c 300))"
    else
        ok "$([ $rc -eq 0 ] && grep -q -- "$pattern" "$T/pull.out"; echo $?)" \
            "PVE $v: $what: pull takes it and says so ($(grep -- "$pattern" "$T/pull.out" | head -3 | tr '\n' ' ' | head -c 300))"
    fi
    check "PVE $v: $what: host config, hooks, working tree and refs outside refs/remotes/sandbox/ unchanged" \
        test "$(host_state)" = "$before"
}

run_version() {
    local v=$1 out rc guest_head before
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    printf '%s\n' "pull-max-bytes 1m" "pull-max-blob-bytes 4m" "pull-max-refs 50" \
        "exec-timeout 120s" | sbx_write_config
    sbx create --name g1 --size small --owner alice --policy locked >/dev/null 2>"$T/err"
    ok $? "PVE $v: create g1 ($(head -c 200 "$T/err"))"
    check "PVE $v: the guest gets a non-root user agent (useradd)" \
        sbx exec g1 -- useradd -m -s /bin/sh agent

    # the host repository: three commits on main
    H=$T/host
    git init -q -b main "$H" && git -C "$H" config user.name host && git -C "$H" config user.email host@example.org
    for i in 1 2 3; do
        echo "line $i" >>"$H/README"
        mkdir -p "$H/src" && echo "int f$i(void);" >>"$H/src/f.h"
        git -C "$H" add -A && git -C "$H" commit -qm "commit $i"
    done
    printf '#!/bin/sh\nexit 0\n' >"$H/.git/hooks/pre-commit"
    chmod +x "$H/.git/hooks/pre-commit"
    base=$(git -C "$H" rev-parse HEAD)

    # push
    out=$(sbx push g1 --repo "$H" 2>&1)
    rc=$?
    ok $rc "PVE $v: push g1 --repo host ($(tr '\n' ' ' <<<"$out" | head -c 300))"
    check "PVE $v: push prints the clone's path in the guest" grep -qx /home/agent/repos/host <<<"$out"
    GUEST_REPO=/home/agent/repos/host
    check "PVE $v: the clone belongs to agent, not root" \
        test "$(sbx exec g1 -- stat -c %U /home/agent/repos/host/.git/HEAD)" = agent
    check "PVE $v: the clone has the three commits and main checked out" \
        test "$(in_guest 'git log --format=%s main | tr "\n" ,; git rev-parse --abbrev-ref HEAD')" = "commit 3,commit 2,commit 1,main"
    check "PVE $v: the clone has no remote (the bundle is gone)" \
        test "$(in_guest 'git remote | wc -l; ls /tmp | grep -c sbx-push; true')" = "0
0"
    check "PVE $v: push recorded the base" \
        test "$(python3 -c 'import json,sys,glob; d=json.load(open(glob.glob(sys.argv[1]+"/git/*.json")[0])); print(d["repos"][sys.argv[2]]["base"])' "$T/state" "$(realpath "$H")")" = "$base"

    # a commit in the guest, pulled and applied
    in_guest 'echo "from the sandbox" >>README && git commit -qam "sandbox work"' >/dev/null
    guest_head=$(in_guest 'git rev-parse HEAD')
    before=$(host_state)
    out=$(sbx pull g1 --repo "$H" 2>&1)
    ok $? "PVE $v: pull g1 ($(tr '\n' ' ' <<<"$out" | head -c 300))"
    check "PVE $v: the branch is in refs/remotes/sandbox/g1/main at the guest's commit" \
        test "$(git -C "$H" rev-parse refs/remotes/sandbox/g1/main)" = "$guest_head"
    printf '%s\n' "$out" >"$T/pull.out"
    check "PVE $v: pull prints the diff stat against the pushed base (1 commit, README)" \
        sh -c "grep -q '1 commit(s) on ${base:0:12}' '$T/pull.out' && grep -q 'README | 1 +' '$T/pull.out'"
    check "PVE $v: nothing flagged" test "$(grep -c FLAG <<<"$out")" = 0
    check "PVE $v: pull changed nothing but refs/remotes/sandbox/" test "$(host_state)" = "$before"
    out=$(sbx apply g1 --repo "$H" --onto main </dev/null 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'no terminal to ask: give --yes' <<<"$out"; echo $?)" \
        "PVE $v: apply without a terminal and without --yes refuses ($(tail -1 <<<"$out"))"
    check "PVE $v: ... and main is unchanged" test "$(git -C "$H" rev-parse main)" = "$base"
    out=$(sbx apply g1 --repo "$H" --onto main --yes </dev/null 2>&1)
    ok $? "PVE $v: apply --yes ($(tr '\n' ' ' <<<"$out" | head -c 300))"
    check "PVE $v: main fast-forwarded to the sandbox's commit, the working tree has it" \
        sh -c "test \"\$(git -C '$H' rev-parse main)\" = '$guest_head' && tail -1 '$H/README' | grep -qx 'from the sandbox' && test -z \"\$(git -C '$H' status --porcelain)\""
    base=$guest_head

    # hostile cases
    fresh hooks && in_guest "printf '#!/bin/sh\ntouch $T/hook-ran 2>/dev/null; exit 0\n' >.git/hooks/post-checkout; cp .git/hooks/post-checkout .git/hooks/reference-transaction; cp .git/hooks/post-checkout .git/hooks/post-merge; chmod +x .git/hooks/*; echo hooked >>README; git commit -qam hooks" >/dev/null
    hostile "$v" "hooks in the guest repo" taken "1 commit(s) on"
    check "PVE $v: hooks in the guest repo: no hook ran on the host, none arrived" \
        sh -c "test ! -e '$T/hook-ran' && test \"\$(ls '$H/.git/hooks' | grep -v sample)\" = pre-commit"

    fresh fsmonitor && in_guest "git config core.fsmonitor 'touch $T/fsmonitor-ran 2>/dev/null; true'; git config core.hooksPath /home/agent/evil; echo cfg >>README; git commit -qam cfg" >/dev/null 2>&1
    hostile "$v" "core.fsmonitor and core.hooksPath in the guest repo's config" taken "1 commit(s) on"
    git -C "$H" status >/dev/null 2>&1
    check "PVE $v: core.fsmonitor and core.hooksPath: the host's config has neither, nothing ran" \
        sh -c "test ! -e '$T/fsmonitor-ran' && ! grep -qiE 'fsmonitor|hookspath' '$H/.git/config'"

    fresh symlink && in_guest "ln -s /etc/passwd leak && mkdir -p a/b && ln -s ../../../etc/shadow a/b/deep && ln -s ../README a/ok && git add -A && git commit -qm links" >/dev/null
    hostile "$v" "symlinks out of the tree" taken "FLAG leak: symlink out of the tree (-> /etc/passwd)"
    check "PVE $v: symlinks: the deep one is flagged too, the one inside the tree is not" \
        sh -c "grep -q 'FLAG a/b/deep: symlink out of the tree' '$T/pull.out' && ! grep -q 'FLAG a/ok' '$T/pull.out'"
    before=$(host_state)
    out=$(sbx apply g1 --repo "$H" --onto main --yes </dev/null 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'flagged change(s) shown above' <<<"$out"; echo $?)" \
        "PVE $v: symlinks: apply --yes without --accept-protected refuses ($(tail -1 <<<"$out"))"
    check "PVE $v: symlinks: ... and changes nothing" test "$(host_state)" = "$before"

    fresh bigblob && in_guest "head -c 2000000 /dev/urandom >big.bin && git add big.bin && git commit -qm big" >/dev/null
    hostile "$v" "a bundle over pull-max-bytes (2 MB of random bytes, cap 1m)" refused "more than pull-max-bytes 1048576"
    check "PVE $v: the refused bundle is removed in the guest" \
        test "$(sbx exec g1 -- sh -c 'ls /tmp | grep -c sbx-pull; true')" = 0
    fresh zeros && in_guest "head -c 16777216 /dev/zero >zeros.bin && git add zeros.bin && git commit -qm zeros" >/dev/null
    hostile "$v" "a blob that inflates past pull-max-blob-bytes (16 MiB of zeros, a small bundle, cap 4m)" refused "more than pull-max-blob-bytes 4194304"

    fresh refs && in_guest 'i=0; while [ $i -lt 60 ]; do echo "create refs/heads/b$i HEAD"; i=$((i+1)); done | git update-ref --stdin' >/dev/null
    hostile "$v" "61 branches (cap pull-max-refs 50)" refused "holds 61 refs, more than pull-max-refs 50"

    fresh notbundle && sbx exec g1 -- sh -c 'printf "#!/bin/sh\n[ \"\$3\" = bundle ] && { echo not a bundle >\"\$6\"; exit 0; }\nexec /usr/bin/git \"\$@\"\n" >/usr/local/bin/git && chmod 755 /usr/local/bin/git'
    hostile "$v" "a bundle that is not a bundle (the guest's git replaced)" refused "is not a git bundle"
    sbx exec g1 -- sh -c 'printf "#!/bin/sh\n[ \"\$3\" = bundle ] && { printf \"# v2 git bundle\\n%%s refs/tags/x\\n\\n\" \$(/usr/bin/git -C \"\$2\" rev-parse HEAD) >\"\$6\"; exit 0; }\nexec /usr/bin/git \"\$@\"\n" >/usr/local/bin/git'
    hostile "$v" "a forged bundle with a tag instead of a branch" refused "not a branch (only refs/heads/\* are taken)"
    sbx exec g1 -- rm -f /usr/local/bin/git

    # a protected path: flagged, applied only with --accept-protected
    fresh protected && in_guest 'mkdir -p .github/workflows && echo "on: push" >.github/workflows/ci.yml && echo "{}" >package.json && echo x >>README && git add -A && git commit -qm protected' >/dev/null
    hostile "$v" "protected paths" taken "FLAG .github/workflows/ci.yml: protected path (matches .github/)"
    check "PVE $v: protected paths: package.json is flagged too, README not" \
        sh -c "grep -q 'FLAG package.json: protected path (matches package.json)' '$T/pull.out' && ! grep -q 'FLAG README' '$T/pull.out'"
    before=$(host_state)
    out=$(sbx apply g1 --repo "$H" --onto main --yes </dev/null 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'give --accept-protected' <<<"$out"; echo $?)" \
        "PVE $v: protected paths: apply --yes alone refuses"
    out=$(sbx apply g1 --repo "$H" --onto main --accept-protected </dev/null 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'no terminal to ask: give --yes' <<<"$out"; echo $?)" \
        "PVE $v: protected paths: apply --accept-protected alone, without a terminal, refuses"
    check "PVE $v: protected paths: ... neither changed anything" test "$(host_state)" = "$before"
    out=$(sbx apply g1 --repo "$H" --onto main --accept-protected --yes </dev/null 2>&1)
    ok $? "PVE $v: protected paths: apply --accept-protected --yes applies ($(tail -1 <<<"$out"))"
    check "PVE $v: protected paths: the workflow is in the host's working tree now" \
        test -f "$H/.github/workflows/ci.yml"

    # MCP: fetch_changes by the label of an mcp-repo, never a path
    in_guest 'echo more >>README && git commit -qam more' >/dev/null
    printf '%s\n' "pull-max-bytes 1m" "pull-max-blob-bytes 4m" "pull-max-refs 50" \
        "exec-timeout 120s" "mcp-repo proj $H" | sbx_write_config
    before=$(host_state)
    printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fetch_changes","arguments":{"name":"g1","repo":"proj"}}}' \
        '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fetch_changes","arguments":{"name":"g1","repo":"'"$H"'"}}}' |
        sbx mcp --owner alice >"$T/mcp.out" 2>"$T/mcp.err"
    check "PVE $v: MCP: tools/list offers fetch_changes (read-only), and no push_repo" \
        python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; t={x["name"]: x for x in [m for m in r if m.get("id") == 2][0]["result"]["tools"]}; sys.exit(0 if "fetch_changes" in t and t["fetch_changes"]["annotations"]["readOnlyHint"] and not any("push" in n for n in t) else 1)' "$T/mcp.out"
    check "PVE $v: MCP: fetch_changes returns the diff summary and the flags" \
        python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; c=[m for m in r if m.get("id") == 3][0]["result"]; sc=c["structuredContent"]; b=sc["branches"][0]; sys.exit(0 if not c.get("isError") and sc["repo"] == "proj" and b["commits"] == 2 and "README" in b["stat"] and any(f["path"] == ".github/workflows/ci.yml" for f in b["flags"]) else 1)' "$T/mcp.out"
    check "PVE $v: MCP: a host path instead of a label is refused" \
        python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; c=[m for m in r if m.get("id") == 4][0]["result"]; sys.exit(0 if c.get("isError") and "mcp-repo" in c["content"][0]["text"] else 1)' "$T/mcp.out"
    check "PVE $v: MCP: fetch_changes updated refs/remotes/sandbox/g1/main only" \
        sh -c "test \"\$(git -C '$H' log -1 --format=%s refs/remotes/sandbox/g1/main)\" = more && test \"\$0\" = \"\$1\"" "$before" "$(host_state)"

    # usage
    sbx push g1 >/dev/null 2>&1
    ok "$([ $? -eq 2 ]; echo $?)" "PVE $v: push without --repo exits 2"
    out=$(sbx pull g1 --repo "$T" 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'not a git repository' <<<"$out"; echo $?)" "PVE $v: pull into a directory that is no repository fails ($out)"
    sbx destroy g1 >/dev/null
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
