/*
 * fuzz_policy.c - the policy parser on any bytes, as a preset file.
 *
 * Properties:
 *   - a load either gives a snapshot or errors, never both, never a crash;
 *   - every error names the file and a line that exists: "f.allow:LINE:COL: ";
 *   - deciding any host from the input is deterministic (twice, same verdict);
 *   - deny wins: when the text loads, the same text plus "deny H." for a
 *     host H it names also loads, and then H is denied (the root dot keeps
 *     a host named like a keyword, "ip" or "country", a host);
 *   - a binding built from the input's lines never allows what the preset
 *     denies.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "policy.h"

#define NOW 1796083200

static struct policy *load(const char *text, size_t len, struct policy_diag *d, size_t lines)
{
    struct policy_builder *b = policy_builder_new();
    static const char base[] = "base.example\ndeny bad.example\n";
    policy_builder_add_preset(b, "base", "base.allow", base, sizeof(base) - 1);
    policy_builder_add_preset(b, "f", "f.allow", text, len);
    struct policy *p = policy_builder_finish(b, d);
    CHECK((p == NULL) == (d->n > 0), "snapshot %p with %zu errors", (void *)p, d->n);
    for (size_t i = 0; i < d->n; i++) {
        unsigned line = 0, col = 0;
        CHECK(sscanf(d->lines[i], "f.allow:%u:%u: ", &line, &col) == 2 ||
                  strncmp(d->lines[i], "f.allow:", 8) == 0,
              "error without its place: %s", d->lines[i]);
        CHECK(line <= lines, "line %u of %zu: %s", line, lines, d->lines[i]);
    }
    return p;
}

/* The first word of the text that normalizes as a host name. */
static bool first_name(const char *text, size_t len, struct policy_host *h)
{
    for (size_t i = 0; i < len;) {
        while (i < len && strchr(" \t\r\n", text[i]) != NULL)
            i++;
        size_t start = i;
        while (i < len && strchr(" \t\r\n", text[i]) == NULL)
            i++;
        if (i > start && policy_host_normalize(text + start, i - start, h) == POLICY_HOST_OK &&
            h->kind == POLICY_HOST_NAME)
            return true;
    }
    return false;
}

static void decide_twice(const struct policy_binding *b, const struct policy_host *h, uint16_t port)
{
    struct policy_verdict v1, v2;
    policy_decide_name(b, h, port, NOW, &v1);
    policy_decide_name(b, h, port, NOW, &v2);
    CHECK(v1.decision == v2.decision && v1.reason == v2.reason && v1.rule.line == v2.rule.line,
          "two verdicts for '%s'", h->text);
}

/* The input's lines as a binding's extras: either refused, or never
 * lifting the preset's deny of bad.example. */
static void check_binding(struct policy *p, const char *text, size_t len)
{
    const char *lines[32];
    char *copy = malloc(len + 1); /* the input is not NUL-terminated */
    memcpy(copy, text, len);
    copy[len] = '\0';
    size_t n = 0;
    struct policy_diag d = {0};
    struct policy_host h;
    struct policy_verdict v;

    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l && n < 32;
         l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    struct policy_binding *b = policy_binding_new(p, "base", lines, n, "sandbox 1", &d);
    CHECK((b == NULL) == (d.n > 0), "binding %p with %zu errors", (void *)b, d.n);
    if (b != NULL) {
        policy_host_normalize("bad.example", 11, &h);
        CHECK(policy_decide_name(b, &h, 443, NOW, &v) == POLICY_DENY, "extras lifted a deny");
    }
    policy_binding_free(b);
    policy_diag_free(&d);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct policy_diag d = {0};
    struct policy_host h;
    struct policy_verdict v;
    size_t lines = 1;

    if (size > 4096)
        return 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    struct policy *p = load(text, size, &d, lines);
    policy_diag_free(&d);
    if (p == NULL)
        return 0;
    check_binding(p, text, size);
    if (!first_name(text, size, &h)) {
        policy_unref(p);
        return 0;
    }
    struct policy_binding *b = policy_binding_new(p, "f", NULL, 0, "t", &d);
    CHECK(b != NULL, "preset f not found");
    decide_twice(b, &h, 443);
    decide_twice(b, &h, (uint16_t)(size * 7919));
    policy_binding_free(b);
    policy_unref(p);

    /* deny wins */
    size_t len2 = size + h.len + 8;
    char *text2 = malloc(len2);
    memcpy(text2, text, size);
    memcpy(text2 + size, "\ndeny ", 6);
    memcpy(text2 + size + 6, h.text, h.len);
    memcpy(text2 + len2 - 2, ".\n", 2);
    p = load(text2, len2, &d, lines + 2);
    CHECK(p != NULL, "adding 'deny %s' broke the load: %s", h.text, d.n ? d.lines[0] : "");
    b = policy_binding_new(p, "f", NULL, 0, "t", &d);
    policy_decide_name(b, &h, 443, NOW, &v);
    CHECK(v.decision != POLICY_ALLOW && v.reason == POLICY_R_DENY_RULE,
          "'%s' not denied: %s %s line %u", h.text, policy_decision_str(v.decision),
          policy_reason_str(v.reason), v.rule.line);
    policy_binding_free(b);
    policy_unref(p);
    policy_diag_free(&d);
    free(text2);
    return 0;
}
