/* review.c - diff stat and flags of a sandbox branch (review.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "git.h"
#include "guest.h"
#include "printable.h"
#include "protect.h"
#include "review.h"

#define OUT_MAX    (64L * 1024 * 1024)
#define LINK_MAX_B 4096
#define FLAGS_MAX  1000

static void flag(json_t *flags, const char *path, const char *why)
{
    if (json_array_size(flags) < FLAGS_MAX)
        json_array_append_new(
            flags, json_pack("{s:o,s:o}", "path",
                             sbx_guest_text((const unsigned char *)path, strlen(path)), "why",
                             sbx_guest_text((const unsigned char *)why, strlen(why))));
}

/* The target of the symlink blob oid (at most LINK_MAX_B bytes), or NULL. */
static char *link_target(const char *repo, const char *oid)
{
    const char *args[] = {"cat-file", "blob", oid, NULL};
    char *out = NULL, err[256];
    size_t n = 0;

    if (sbx_git_run(repo, args, NULL, &out, &n, LINK_MAX_B, err, sizeof err) != 0) {
        free(out);
        return NULL;
    }
    if (strlen(out) != n) { /* a NUL in a link target: no path */
        free(out);
        return NULL;
    }
    return out;
}

/* One entry of `diff --raw -z`: ":OLDMODE NEWMODE OLD NEW STATUS" + path. */
static void judge(const struct sbx_config *c, const char *repo, const char *meta, const char *path,
                  json_t *flags)
{
    char newmode[8] = "", newoid[48] = "", why[600];
    const char *pat = sbx_protected_match((const char *const *)c->protected_paths, path);

    if (sscanf(meta, ":%*7s %7s %*47s %47s", newmode, newoid) != 2)
        return;
    if (pat) {
        snprintf(why, sizeof why, "protected path (matches %s)", pat);
        flag(flags, path, why);
    }
    if (strcmp(newmode, "120000") == 0) {
        char *t = link_target(repo, newoid);
        if (!t || sbx_link_escapes(path, t)) {
            snprintf(why, sizeof why, "symlink out of the tree (-> %.400s)", t ? t : "?");
            flag(flags, path, why);
        }
        free(t);
    } else if (strcmp(newmode, "160000") == 0) {
        flag(flags, path, "submodule (a commit of another repository)");
    }
}

static int raw_flags(const struct sbx_config *c, const char *repo, const char *base,
                     const char *commit, json_t *review, char *err, size_t errlen)
{
    const char *args[] = {
        "diff",          "--raw", "-z",   "--no-renames", "--no-abbrev", "--no-ext-diff",
        "--no-textconv", base,    commit, "--",           NULL};
    char *out;
    size_t n, off = 0, files = 0;
    json_t *flags = json_array();

    if (sbx_git_run(repo, args, NULL, &out, &n, OUT_MAX, err, errlen) != 0) {
        free(out);
        json_decref(flags);
        return -1;
    }
    while (off < n) {
        const char *meta = out + off, *path;
        off += strlen(meta) + 1;
        if (off >= n)
            break;
        path = out + off;
        off += strlen(path) + 1;
        files++;
        judge(c, repo, meta, path, flags);
    }
    free(out);
    json_object_set_new(review, "files", json_integer((json_int_t)files));
    json_object_set_new(review, "flags", flags);
    return 0;
}

static int stat_text(const char *repo, const char *base, const char *commit, json_t *review,
                     char *err, size_t errlen)
{
    const char *args[] = {
        "diff", "--stat=100", "--no-renames", "--no-ext-diff", "--no-textconv", base, commit,
        "--",   NULL};
    char *out;

    if (sbx_git(repo, args, &out, OUT_MAX, err, errlen))
        return -1;
    json_object_set_new(review, "stat", sbx_guest_text((const unsigned char *)out, strlen(out)));
    free(out);
    return 0;
}

static int counts(const char *repo, const char *base, const char *commit, json_t *review, char *err,
                  size_t errlen)
{
    char range[200];
    const char *count[] = {"rev-list", "--count", range, NULL};
    const char *anc[] = {"merge-base", "--is-ancestor", base, commit, NULL};
    char *out;
    int rc;

    snprintf(range, sizeof range, "%s..%s", base, commit);
    if (sbx_git(repo, count, &out, 4096, err, errlen))
        return -1;
    json_object_set_new(review, "commits", json_integer(atol(out)));
    free(out);
    rc = sbx_git_run(repo, anc, NULL, NULL, NULL, 0, err, errlen);
    if (rc != 0 && rc != 1)
        return -1;
    json_object_set_new(review, "descendant", json_boolean(rc == 0));
    return 0;
}

int sbx_review(const struct sbx_config *c, const char *repo, const char *base, const char *commit,
               json_t **out, char *err, size_t errlen)
{
    json_t *r = json_pack("{s:s,s:s}", "base", base, "commit", commit);

    *out = NULL;
    if (counts(repo, base, commit, r, err, errlen) ||
        stat_text(repo, base, commit, r, err, errlen) ||
        raw_flags(c, repo, base, commit, r, err, errlen)) {
        json_decref(r);
        return -1;
    }
    *out = r;
    return 0;
}

void sbx_review_print(json_t *r, const char *label)
{
    const char *base = sbx_printable_get(r, "base");
    char *stat = json_is_string(json_object_get(r, "stat"))
                     ? strdup(json_string_value(json_object_get(r, "stat")))
                     : NULL;
    json_t *f;
    size_t i;

    printf("%s: %d commit(s) on %.12s%s, %d file(s) changed\n", label,
           (int)json_integer_value(json_object_get(r, "commits")), base ? base : "?",
           json_is_true(json_object_get(r, "descendant"))
               ? ""
               : " (NOT on top of it: history rewritten)",
           (int)json_integer_value(json_object_get(r, "files")));
    if (stat) { /* the guest's paths, one per line */
        sbx_printable_lines(stat);
        fputs(stat, stdout);
        free(stat);
    }
    json_array_foreach(json_object_get(r, "flags"), i, f)
    {
        printf("  FLAG %s: %s\n", sbx_printable_get(f, "path"), sbx_printable_get(f, "why"));
    }
}
