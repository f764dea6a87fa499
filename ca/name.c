/*
 * name.c - DNS host names, and the rules (host, "*.domain", ".domain") that
 * name the hosts a CA may vouch for.
 *
 * The names come from policy/, which lower-cases them; here they are only
 * checked, never rewritten, so a name that is not already normalized is an
 * error of the caller's, reported as such.
 */
#include <string.h>

#include "ca_int.h"

enum { LABEL_MAX = 63 }; /* RFC 1035 §2.3.4 */

static bool is_lower_ldh(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Check one label s[0..len), len >= 1: LDH, no hyphen at either end (RFC
 * 1123 §2.1 allows a leading digit). */
static enum ca_name_error label_check(const char *s, size_t len)
{
    if (len > LABEL_MAX)
        return CA_NAME_LABEL_LONG;
    for (size_t i = 0; i < len; i++) {
        if (s[i] >= 'A' && s[i] <= 'Z')
            return CA_NAME_UPPER;
        if (!is_lower_ldh(s[i]))
            return CA_NAME_BYTE;
    }
    if (s[0] == '-' || s[len - 1] == '-')
        return CA_NAME_HYPHEN;
    return CA_NAME_OK;
}

static bool all_digits(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

enum ca_name_error ca_name_check(const char *s, size_t len)
{
    size_t start = 0;

    if (len == 0)
        return CA_NAME_EMPTY;
    if (len > CA_HOST_MAX)
        return CA_NAME_TOO_LONG;
    if (memchr(s, ':', len) != NULL)
        return CA_NAME_IP;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.')
            continue;
        if (i == start)
            return CA_NAME_LABEL_EMPTY;
        enum ca_name_error e = label_check(s + start, i - start);
        if (e != CA_NAME_OK)
            return e;
        if (i == len && all_digits(s + start, i - start))
            return CA_NAME_IP;
        start = i + 1;
    }
    return CA_NAME_OK;
}

const char *ca_name_error_str(enum ca_name_error e)
{
    switch (e) {
    case CA_NAME_OK: return "a host name";
    case CA_NAME_EMPTY: return "empty";
    case CA_NAME_TOO_LONG: return "longer than 253 bytes";
    case CA_NAME_LABEL_EMPTY: return "an empty label (a leading or trailing dot, or two in a row)";
    case CA_NAME_LABEL_LONG: return "a label longer than 63 bytes";
    case CA_NAME_UPPER: return "upper case (names must come normalized, lower case)";
    case CA_NAME_BYTE: return "a byte other than a-z, 0-9, '-' and '.'";
    case CA_NAME_HYPHEN: return "a label that starts or ends with '-'";
    case CA_NAME_IP: return "an IP address, not a host name";
    }
    return "an unknown error";
}

bool ca_name_under(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen > blen + 1 && a[alen - blen - 1] == '.' && memcmp(a + alen - blen, b, blen) == 0;
}

bool ca_name_at_or_under(const char *a, size_t alen, const char *b, size_t blen)
{
    return (alen == blen && memcmp(a, b, blen) == 0) || ca_name_under(a, alen, b, blen);
}

/* Split text into r's kind and name, before the name itself is checked. */
static void rule_split(const char *text, struct ca_rule *r)
{
    size_t len = strlen(text);

    if (len >= 2 && text[0] == '*' && text[1] == '.') {
        *r = (struct ca_rule){CA_RULE_SUBDOMAINS, text + 2, len - 2};
    } else if (len >= 1 && text[0] == '.') {
        *r = (struct ca_rule){CA_RULE_DOMAIN, text + 1, len - 1};
    } else {
        *r = (struct ca_rule){CA_RULE_HOST, text, len};
    }
}

bool ca_rule_parse(const char *text, size_t index, struct ca_rule *r, char *err, size_t errlen)
{
    enum ca_name_error e;

    if (text == NULL) {
        ca_err(err, errlen, "ca_authority_new: names[%zu] is NULL", index);
        return false;
    }
    if (strcmp(text, "*") == 0 || text[0] == '~') {
        ca_err(err, errlen,
               "ca_authority_new: names[%zu] \"%.64s\": %s names no domain to constrain a CA to",
               index, text, text[0] == '~' ? "a regex rule" : "the catch-all rule");
        return false;
    }
    rule_split(text, r);
    e = ca_name_check(r->name, r->len);
    if (e != CA_NAME_OK) {
        ca_err(err, errlen, "ca_authority_new: names[%zu] \"%.64s%s\": %s", index, text,
               strlen(text) > 64 ? "..." : "", ca_name_error_str(e));
        return false;
    }
    if (r->kind == CA_RULE_SUBDOMAINS && r->len > CA_HOST_MAX - 2) {
        ca_err(err, errlen,
               "ca_authority_new: names[%zu] \"%.64s...\": no host name fits under a domain of "
               "%zu bytes",
               index, text, r->len);
        return false;
    }
    return true;
}
