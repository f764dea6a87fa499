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
 *     denies;
 *   - inject: the verdict's flag is exactly "not denied, and
 *     policy_injects_for() lists some rule", on any host and port; every
 *     rule policy_binding_inject() lists is well formed (a kind, a lower
 *     case field, a secret name, a host that normalizes to itself);
 *   - an inject rule allows: the text plus "H. inject bearer secret fz"
 *     loads, H is then allowed (or denied by a deny rule, without the
 *     flag) and the new rule is among H's injects.
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

/* The verdict's inject flag against the list injects_for gives. */
static void check_inject_flag(const struct policy_binding *b, const struct policy_host *h,
                              uint16_t port, const struct policy_verdict *v)
{
    size_t n = policy_injects_for(b, h, port, NOW, NULL, 0);
    CHECK(v->inject == (v->decision != POLICY_DENY && n > 0),
          "'%s':%u: inject %d, decision %s, %zu injects", h->text, port, v->inject,
          policy_decision_str(v->decision), n);
}

static void decide_twice(const struct policy_binding *b, const struct policy_host *h, uint16_t port)
{
    struct policy_verdict v1, v2;
    policy_decide_name(b, h, port, NOW, &v1);
    policy_decide_name(b, h, port, NOW, &v2);
    CHECK(v1.decision == v2.decision && v1.reason == v2.reason && v1.rule.line == v2.rule.line &&
              v1.inject == v2.inject,
          "two verdicts for '%s'", h->text);
    check_inject_flag(b, h, port, &v1);
}

/* Every inject rule of b well formed. */
static void check_inject_list(const struct policy_binding *b)
{
    const struct policy_inject *in;
    for (size_t i = 0; (in = policy_binding_inject(b, i)) != NULL; i++) {
        size_t skip = strncmp(in->host, "*.", 2) == 0 ? 2 : in->host[0] == '.';
        struct policy_host h;
        CHECK(policy_host_normalize(in->host + skip, strlen(in->host + skip), &h) ==
                      POLICY_HOST_OK &&
                  h.kind == POLICY_HOST_NAME && strcmp(h.text, in->host + skip) == 0,
              "inject host '%s'", in->host);
        CHECK(in->field[0] != '\0' && strspn(in->field, "abcdefghijklmnopqrstuvwxyz0123456789"
                                                        "!#$%&'*+-.^_`|~") == strlen(in->field),
              "inject field '%s'", in->field);
        CHECK(strlen(in->secret) <= 63 &&
                  strchr("abcdefghijklmnopqrstuvwxyz0123456789", in->secret[0]) != NULL &&
                  strspn(in->secret, "abcdefghijklmnopqrstuvwxyz0123456789_-") ==
                      strlen(in->secret),
              "inject secret '%s'", in->secret);
        CHECK(in->rule.file != NULL && in->rule.line > 0, "inject without its place");
        CHECK(strcmp(policy_inject_kind_str(in->kind), "header") != 0 ||
                  in->kind == POLICY_INJECT_HEADER,
              "inject kind %d", (int)in->kind);
    }
}

/* The text plus "H. inject bearer secret fz" on line `lines`: loads, and
 * H on 443 is then allowed with that rule among its injects, unless a deny
 * rule denies it (and then without the flag). */
static void check_inject_allows(const char *text, size_t size, size_t lines,
                                const struct policy_host *h)
{
    static const char tail[] = ". inject bearer secret fz\n";
    size_t len = size + 1 + h->len + sizeof(tail) - 1;
    char *t = malloc(len);
    struct policy_diag d = {0};
    struct policy_verdict v;
    const struct policy_inject *out[64];

    memcpy(t, text, size);
    t[size] = '\n';
    memcpy(t + size + 1, h->text, h->len);
    memcpy(t + size + 1 + h->len, tail, sizeof(tail) - 1);
    struct policy *p = load(t, len, &d, lines + 1);
    CHECK(p != NULL, "adding '%s. inject' broke the load: %s", h->text, d.n ? d.lines[0] : "");
    struct policy_binding *b = policy_binding_new(p, "f", NULL, 0, "t", &d);
    policy_decide_name(b, h, 443, NOW, &v);
    CHECK(v.decision == POLICY_ALLOW || v.reason == POLICY_R_DENY_RULE,
          "'%s' with an inject rule: %s %s", h->text, policy_decision_str(v.decision),
          policy_reason_str(v.reason));
    CHECK(v.inject == (v.decision != POLICY_DENY), "'%s': inject %d, %s", h->text, v.inject,
          policy_decision_str(v.decision));
    size_t n = policy_injects_for(b, h, 443, NOW, out, 64), found = 0;
    for (size_t i = 0; i < n && i < 64; i++)
        found += strcmp(out[i]->secret, "fz") == 0 && out[i]->rule.line == lines + 1 &&
                 strcmp(out[i]->host, h->text) == 0 && out[i]->kind == POLICY_INJECT_BEARER;
    CHECK(found == 1 || n > 64, "'%s': the new inject rule not among %zu", h->text, n);
    check_inject_list(b);
    policy_binding_free(b);
    policy_unref(p);
    policy_diag_free(&d);
    free(t);
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
        CHECK(policy_decide_name(b, &h, 443, NOW, &v) == POLICY_DENY && !v.inject,
              "extras lifted a deny");
        check_inject_list(b);
        for (size_t i = 0; i < n; i++) /* each extra line's first word, as a host */
            if (policy_host_normalize(lines[i], strcspn(lines[i], " \t\r:"), &h) ==
                POLICY_HOST_OK) {
                policy_decide_name(b, &h, 443, NOW, &v);
                check_inject_flag(b, &h, 443, &v);
            }
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
    check_inject_list(b);
    uint16_t any_port;
    policy_decide_name_any(b, &h, NOW, &v, &any_port);
    CHECK(!v.inject || v.decision != POLICY_DENY, "'%s': inject on a deny (any port)", h.text);
    policy_binding_free(b);
    policy_unref(p);
    check_inject_allows(text, size, lines, &h);

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
    CHECK(v.decision != POLICY_DENY || !v.inject, "'%s' denied with inject", h.text);
    policy_binding_free(b);
    policy_unref(p);
    policy_diag_free(&d);
    free(text2);
    return 0;
}
