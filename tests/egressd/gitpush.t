#!/usr/bin/env bash
# gitpush.t - `git-push REFGLOB` rules: the real git pushes over smart HTTP
# through egressd to `git http-backend` (run as CGI by gitsrv.py); a
# push to a ref the rule admits reaches the repository, one to any other
# ref (or a delete under no-delete) is refused before the origin sees it,
# with egressd's reason in git's own output ("! [remote rejected] ...");
# a push that mixes both is refused whole; clone and fetch are not
# affected.  Under `no-force` a fast-forward (a new commit, 300, a merge,
# a push from a repository with a bitmap, whose commits come after its
# trees) passes and a rewrite (an amended commit pushed with --force) is
# refused in git's words, the origin unchanged, while a rule without it
# still takes a forced push.  Then over HTTPS with an `inject basic` line beside the push
# rule: egressd intercepts, the origin gets the real token where git sent
# the sandbox's placeholder, and the push rule (with no-force) holds there
# too.  TAP on
# stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.27 git.test
egd_allow 'git.test:8000 git-push refs/heads/agent/**,refs/tags/agent-* no-delete' \
    'git.test:8000 git-push refs/heads/safe/** no-force' \
    'git.test:4443 inject basic secret github' 'git.test:4443 git-push refs/heads/agent/** no-force'
RULE=$(awk '/^git\.test:8000 git-push/ { print "test.allow:" NR; exit }' "$T/policies/test.allow")
RULE_FF=$(awk '/^git\.test:8000 git-push refs\/heads\/safe/ { print "test.allow:" NR; exit }' "$T/policies/test.allow")
RULE_TLS=$(awk '/^git\.test:4443 git-push/ { print "test.allow:" NR; exit }' "$T/policies/test.allow")
S=$T/secrets
mkdir -m 700 "$S" && (umask 077 && printf 'ghp_REAL_gitpush\n' >"$S/github")

# The origin: a bare repository with one commit on main, pushes allowed.
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@test \
    GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@test
SRV=$T/srv
mkdir -p "$SRV"
git init -q --bare -b main "$SRV/repo.git" && git -C "$SRV/repo.git" config http.receivepack true &&
    git init -q -b main "$T/seed" && git -C "$T/seed" commit -q --allow-empty -m first &&
    git -C "$T/seed" push -q "$SRV/repo.git" main || bail "the origin's repository"
MAIN0=$(git -C "$SRV/repo.git" rev-parse main)
egm_server "$T/gitsrv.out" "$EGD_PY" -u "$EGD_DIR/gitsrv.py" --listen 127.0.0.27:8000 \
    --root "$SRV" || bail "the git server starts"
egd_cert git.test || bail "git.test's certificate"
egm_server "$T/gitsrv-tls.out" "$EGD_PY" -u "$EGD_DIR/gitsrv.py" --listen 127.0.0.27:4443 \
    --root "$SRV" --tls "$T/certs/git.test.pem" "$T/certs/git.test.key" \
    --log "$T/gitsrv-tls.log" || bail "the git server starts on TLS"
egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" || bail "egressd starts and answers /healthz"
URL=http://git.test:8000/git/repo.git
G=(git -c "http.proxy=http://$EGD_PROXY")

# origin_ref REF: the origin's commit for REF ("" when it has none).
origin_ref() { git -C "$SRV/repo.git" rev-parse -q --verify "$1" 2>/dev/null; }

# --- clone and fetch: not affected.
"${G[@]}" clone -q "$URL" "$T/work" >"$T/clone.out" 2>&1
ok $? "git clone through egressd"
sed 's/^/#   /' "$T/clone.out" | head -n 5
cd "$T/work" || bail "the clone"
git commit -q --allow-empty -m second

# --- a push the rule admits.
"${G[@]}" push origin HEAD:refs/heads/agent/x >"$T/p1.out" 2>&1
ok $? "git push to refs/heads/agent/x passes"
check "  the origin has it" test "$(origin_ref refs/heads/agent/x)" = "$(git rev-parse HEAD)"

# --- a push to main: refused in git's own words, the origin unchanged.
egd_log_mark
"${G[@]}" push origin HEAD:refs/heads/main >"$T/p2.out" 2>&1
rc=$?
sed 's/^/#   /' "$T/p2.out"
ok "$([ $rc -ne 0 ] && grep -q "! \[remote rejected\] HEAD -> main (egressd: this sandbox may not push there (rule $RULE))" "$T/p2.out" && echo 0 || echo 1)" \
    "git push to main is refused; git shows egressd's reason and the rule"
check "  the origin's main is unchanged" test "$(origin_ref refs/heads/main)" = "$MAIN0"
egd_log_ok "  egressd logged it: deny push_not_allowed, the rule, the receive-pack POST" \
    'l["host"] == "git.test" and l["method"] == "POST"' \
    "l['decision'] == 'deny' and l['reason'] == 'push_not_allowed' and l['rule'] == '$RULE' and l['path'].endswith('/git-receive-pack')"

# --- no-delete.
"${G[@]}" push origin :refs/heads/agent/x >"$T/p3.out" 2>&1
rc=$?
ok "$([ $rc -ne 0 ] && grep -q 'remote rejected.*agent/x (egressd: this sandbox may not push there' "$T/p3.out" && echo 0 || echo 1)" \
    "deleting refs/heads/agent/x is refused (no-delete)"
check "  the origin still has it" test -n "$(origin_ref refs/heads/agent/x)"

# --- a push of two refs, one refused: neither goes.
git commit -q --allow-empty -m third
"${G[@]}" push origin HEAD:refs/heads/agent/y HEAD:refs/heads/release >"$T/p4.out" 2>&1
rc=$?
sed 's/^/#   /' "$T/p4.out"
ok "$([ $rc -ne 0 ] && grep -q 'agent/y (egressd: not pushed: another ref of this push was refused)' "$T/p4.out" &&
    grep -q 'release (egressd: this sandbox may not push there' "$T/p4.out" && echo 0 || echo 1)" \
    "a push of agent/y and release is refused whole, each ref with its reason"
check "  the origin has neither" test -z "$(origin_ref refs/heads/agent/y)$(origin_ref refs/heads/release)"

# --- a tag the rule admits, then fetch.
git tag agent-1
"${G[@]}" push -q origin agent-1 >"$T/p5.out" 2>&1
ok $? "git push of the tag agent-1 passes"
"${G[@]}" fetch -q origin >"$T/f.out" 2>&1
ok $? "git fetch through egressd is not affected"

# --- no-force: fast-forwards pass, a rewrite is refused before the origin.
"${G[@]}" push -q origin HEAD:refs/heads/safe/a >"$T/nf1.out" 2>&1
ok $? "no-force: creating refs/heads/safe/a passes (a new ref rewrites nothing)"
git commit -q --allow-empty -m ff-1
"${G[@]}" push -q origin HEAD:refs/heads/safe/a >"$T/nf2.out" 2>&1
ok $? "  one new commit on top (a fast-forward) passes"
check "  the origin has it" test "$(origin_ref refs/heads/safe/a)" = "$(git rev-parse HEAD)"
for i in $(seq 1 300); do git commit -q --allow-empty -m "many $i"; done
"${G[@]}" push -q origin HEAD:refs/heads/safe/a >"$T/nf3.out" 2>&1
ok $? "  300 new commits on top pass"
check "  the origin has the last" test "$(origin_ref refs/heads/safe/a)" = "$(git rev-parse HEAD)"
git checkout -q -b side "$MAIN0" && git commit -q --allow-empty -m side &&
    git checkout -q - && git merge -q --no-edit side >/dev/null 2>&1
"${G[@]}" push -q origin HEAD:refs/heads/safe/a >"$T/nf4.out" 2>&1
ok $? "  a merge whose first parent is the old commit passes"
check "  the origin has the merge" test "$(origin_ref refs/heads/safe/a)" = "$(git rev-parse HEAD)"
# a repository with a bitmap sends its packed objects first (trees and
# blobs too), then the loose commits: the walk must read on past the trees
for i in 1 2 3; do echo "$i" >"b$i.txt" && git add "b$i.txt" && git commit -q -m "packed $i"; done
git repack -q -adb
for i in 4 5; do echo "$i" >"b$i.txt" && git add "b$i.txt" && git commit -q -m "loose $i"; done
"${G[@]}" push -q origin HEAD:refs/heads/safe/a >"$T/nf9.out" 2>&1
ok $? "  from a repository with a bitmap (commits after trees in the pack) it passes too"
sed 's/^/#   /' "$T/nf9.out" | head -n 3
check "  the origin has it" test "$(origin_ref refs/heads/safe/a)" = "$(git rev-parse HEAD)"
before=$(origin_ref refs/heads/safe/a)
git commit -q --amend --allow-empty -m "the merge, rewritten"
egd_log_mark
"${G[@]}" push --force origin HEAD:refs/heads/safe/a >"$T/nf5.out" 2>&1
rc=$?
sed 's/^/#   /' "$T/nf5.out"
ok "$([ $rc -ne 0 ] && grep -q "! \[remote rejected\] HEAD -> safe/a (egressd: not a fast-forward, and this sandbox may not force a push (rule $RULE_FF))" "$T/nf5.out" && echo 0 || echo 1)" \
    "  an amended commit pushed with --force is refused, in git's words"
check "  the origin's safe/a is unchanged" test "$(origin_ref refs/heads/safe/a)" = "$before"
egd_log_ok "  egressd logged it: deny push_not_allowed, the no-force rule" \
    'l["host"] == "git.test" and l["method"] == "POST"' \
    "l['decision'] == 'deny' and l['reason'] == 'push_not_allowed' and l['rule'] == '$RULE_FF'"
"${G[@]}" push --force origin "$MAIN0:refs/heads/safe/a" >"$T/nf6.out" 2>&1
rc=$?
ok "$([ $rc -ne 0 ] && grep -q 'safe/a (egressd: not a fast-forward' "$T/nf6.out" && echo 0 || echo 1)" \
    "  moving it back to an older commit (no new objects) is refused too"
check "  the origin's safe/a is still unchanged" test "$(origin_ref refs/heads/safe/a)" = "$before"
"${G[@]}" push -q --force origin HEAD:refs/heads/agent/x >"$T/nf7.out" 2>&1
ok $? "a forced push to agent/x, whose rule says no no-force, passes"
check "  the origin has it" test "$(origin_ref refs/heads/agent/x)" = "$(git rev-parse HEAD)"
"${G[@]}" push -q origin :refs/heads/safe/a >"$T/nf8.out" 2>&1
ok $? "deleting safe/a passes (no-force is not no-delete)"
cd / || true

# --- HTTPS, a secret injected, the push rule held inside the tunnel.
egd_put sb '{"id":"sb","addresses":["127.0.0.1"],"policy":"test","secrets":["github"]}' \
    >/dev/null || bail "bind sandbox sb (127.0.0.1) with the secret github"
egd_admin GET /v1/sandboxes/sb/credentials >"$T/cred.json" || bail "GET sb's credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"])' \
    "$T/cred.json" "$T/sbca.pem"
PH=$(py -c 'import json,sys; print(json.load(open(sys.argv[1]))["placeholders"]["github"])' "$T/cred.json")
AUTH="Authorization: Basic $(printf 'x-access-token:%s' "$PH" | base64 -w0)"
GS=(git -c "http.proxy=http://$EGD_PROXY" -c "http.sslCAInfo=$T/sbca.pem" -c "http.extraHeader=$AUTH")
TURL=https://git.test:4443/git/repo.git
"${GS[@]}" clone -q "$TURL" "$T/work2" >"$T/clone2.out" 2>&1
ok $? "HTTPS: git clone through egressd, which intercepts (the sandbox's CA) and injects"
sed 's/^/#   /' "$T/clone2.out" | head -n 5
check "  the origin got the real token where git sent the placeholder" py -c '
import base64, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
auth = [l["authorization"] or "" for l in lines]
dec = [base64.b64decode(a.split(" ", 1)[1]).decode() for a in auth if a.startswith("Basic ")]
sys.exit(0 if dec and all(d == "x-access-token:ghp_REAL_gitpush" for d in dec) else 1)' "$T/gitsrv-tls.log"
cd "$T/work2" || bail "the HTTPS clone"
git commit -q --allow-empty -m fourth
"${GS[@]}" push -q origin HEAD:refs/heads/agent/tls >"$T/p6.out" 2>&1
ok $? "HTTPS: git push to refs/heads/agent/tls passes"
check "  the origin has it" test "$(origin_ref refs/heads/agent/tls)" = "$(git rev-parse HEAD)"
git commit -q --allow-empty -m fifth
"${GS[@]}" push -q origin HEAD:refs/heads/agent/tls >"$T/p8.out" 2>&1
ok $? "HTTPS, no-force: a fast-forward of agent/tls passes"
tls_before=$(origin_ref refs/heads/agent/tls)
git commit -q --amend --allow-empty -m "fifth, rewritten"
"${GS[@]}" push --force origin HEAD:refs/heads/agent/tls >"$T/p9.out" 2>&1
rc=$?
ok "$([ $rc -ne 0 ] && grep -q "! \[remote rejected\] HEAD -> agent/tls (egressd: not a fast-forward, and this sandbox may not force a push (rule $RULE_TLS))" "$T/p9.out" && echo 0 || echo 1)" \
    "HTTPS, no-force: a forced rewrite of agent/tls is refused inside the tunnel, in git's words"
check "  the origin's agent/tls is unchanged" test "$(origin_ref refs/heads/agent/tls)" = "$tls_before"
"${GS[@]}" push origin HEAD:refs/heads/main >"$T/p7.out" 2>&1
rc=$?
sed 's/^/#   /' "$T/p7.out"
ok "$([ $rc -ne 0 ] && grep -q "! \[remote rejected\] HEAD -> main (egressd: this sandbox may not push there (rule $RULE_TLS))" "$T/p7.out" && echo 0 || echo 1)" \
    "HTTPS: git push to main is refused inside the tunnel, in git's words"
check "  the origin's main is unchanged" test "$(origin_ref refs/heads/main)" = "$MAIN0"
cd / || true

egd_finish
tap_end
