#!/usr/bin/env bash
# make.sh [OUT] - write the packs of tests/data/git-pack/ again, into OUT
# (default: this folder), from repositories made in a temporary directory
# with the real git.  Fixed names, e-mails and dates make the commit ids
# the same on every run (README.md lists them); the pack bytes depend on
# git's version (deltas, zlib): these were written by git 2.39.5.
set -eu

out=$(cd "${1:-$(dirname "$0")}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=tester@example.com
export GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=tester@example.com
export GIT_CONFIG_NOSYSTEM=1 HOME=$tmp
tick=1700000000

# commit MSG...: git commit -a with the next fixed date.
commit() {
    tick=$((tick + 60))
    GIT_AUTHOR_DATE="@$tick +0000" GIT_COMMITTER_DATE="@$tick +0000" \
        git commit -q -a -m "$*"
}

# pack NAME OPTIONS... < REVS: git pack-objects --revs --stdout into OUT/NAME.
pack() {
    local name=$1
    shift
    git pack-objects -q --revs --stdout "$@" >"$out/$name"
}

# ---- SHA-1: A-B-C-D on main; R rewrites C and D; side S1 (off C) and
# the merge M of main into side; an annotated tag v1 on D.
git init -q -b main "$tmp/sha1"
cd "$tmp/sha1"
echo one >a.txt && git add a.txt && commit A
echo two >a.txt && commit B
echo three >b.txt && git add b.txt && commit C
echo four >b.txt && commit D
git checkout -q -b rewrite main~2
echo rewritten >a.txt && commit R
git checkout -q -b side main~1
echo side >c.txt && git add c.txt && commit S1
tick=$((tick + 60))
GIT_AUTHOR_DATE="@$tick +0000" GIT_COMMITTER_DATE="@$tick +0000" \
    git merge -q --no-ff -m M main
GIT_COMMITTER_DATE="@$tick +0000" git tag -a v1 -m 'release 1' main

# What a push of D onto B sends (send-pack: NEW, ^OLD, thin, offsets).
printf '%s\n' main ^main~2 | pack linear-thin.pack --thin --delta-base-offset
# Every commit of main, no thin pack.
printf '%s\n' main | pack linear-full.pack --delta-base-offset
# A forced push of R onto D: R's parent is B, D is not reached.
printf '%s\n' rewrite ^main | pack rewrite.pack --thin --delta-base-offset
# A push of M onto D: M's second parent is D.
printf '%s\n' side ^main | pack merge.pack --thin --delta-base-offset
# A push of the tag v1 (and D) onto C: the tag object before the trees.
printf '%s\n' "$(git rev-parse v1)" ^main~1 | pack tag.pack --thin --delta-base-offset

# ---- SHA-1, commits that are deltas of each other: long, nearly equal
# messages, a wide window and deep chains.
git init -q -b main "$tmp/delta"
cd "$tmp/delta"
# Commit i changes lines 1 to 10i of the message: its nearest is i - 1.
for i in 1 2 3 4 5 6; do
    long=$(for l in $(seq 1 60); do
        [ "$l" -le $((10 * i)) ] && w=changed || w=original
        printf 'line %02d of a long commit message, %s\n' "$l" "$w"
    done)
    echo "$i" >n.txt
    git add n.txt
    commit "change $i

$long"
done
printf '%s\n' main | pack delta-ofs.pack --window=50 --depth=50 --delta-base-offset
printf '%s\n' main | pack delta-ref.pack --window=50 --depth=50

# ---- SHA-256: A-B-C; a push of C onto A.
git init -q -b main --object-format=sha256 "$tmp/sha256"
cd "$tmp/sha256"
echo one >a.txt && git add a.txt && commit A
echo two >a.txt && commit B
echo three >a.txt && commit C
printf '%s\n' main ^main~2 | pack sha256-thin.pack --thin --delta-base-offset

# ---- SHA-1, commits after trees: messages that grow, so that each commit
# is kept on disk as a delta on the newest (git repack), and a tag on a
# commit in the middle of what is pushed: git 2.39's compute_write_order
# writes the tagged commit and those before it first, then the trees, and
# the commits after it (reused deltas, not "commits" to it) among them.
git init -q -b main "$tmp/late"
cd "$tmp/late"
for i in 1 2 3 4 5 6 7 8; do
    long=$(for l in $(seq 1 $((20 + 5 * i))); do
        printf 'line %02d of a long commit message that grows\n' "$l"
    done)
    echo "$i" >n.txt
    git add n.txt
    commit "change $i

$long"
done
git repack -q -adf --window=50 --depth=50
git tag t5 main~3
printf '%s\n' main ^main~7 | pack tagged-late.pack --thin --delta-base-offset

# ---- SHA-1, a repository with a bitmap (git repack -b): the objects come
# as the bitmap walk finds them: the packed commits, trees and blobs,
# then the loose commits and theirs.
git init -q -b main "$tmp/bitmap"
cd "$tmp/bitmap"
for i in 1 2 3 4 5 6; do
    echo "$i" >"f$i.txt"
    git add "f$i.txt"
    commit "c$i"
done
git repack -q -adb
for i in 7 8; do
    echo "$i" >"f$i.txt"
    git add "f$i.txt"
    commit "c$i"
done
printf '%s\n' main ^main~4 | pack bitmap-loose.pack --thin --delta-base-offset

# ---- SHA-1, a bitmap and commits kept as deltas on older ones (messages
# that shrink): the pushed commits come as REF_DELTAs on a commit outside
# the pack, after the trees and blobs.
git init -q -b main "$tmp/bitmap-delta"
cd "$tmp/bitmap-delta"
for i in 1 2 3 4 5 6 7 8; do
    long=$(for l in $(seq 1 $((80 - 5 * i))); do
        printf 'line %02d of a long commit message that shrinks\n' "$l"
    done)
    echo "$i" >n.txt
    git add n.txt
    commit "change $i

$long"
done
git repack -q -adf -b --window=50 --depth=50
printf '%s\n' main ^main~2 | pack bitmap-thin.pack --thin --delta-base-offset

# The ids, for README.md.
for r in sha1 delta sha256 late bitmap bitmap-delta; do
    echo "== $r"
    git -C "$tmp/$r" log --all --format='%H %P %s'
    git -C "$tmp/$r" for-each-ref --format='%(refname) %(objectname) %(objecttype)' refs/tags
done
