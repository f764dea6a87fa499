/*
 * fuzz_host.c - properties of policy_host_normalize() on any bytes:
 *   - a host that normalizes normalizes again to itself (idempotent);
 *   - a name is lower-case LDH: labels of 1..63 bytes, no hyphen at either
 *     end, at most 253 bytes, a last label that no parser reads as a number;
 *   - an IPv4 host is what inet_pton() reads and inet_ntop() writes back;
 *   - an IPv6 host is "[" inet_ntop() "]" of what inet_pton() reads;
 *   - a name is the input lower-cased, less one trailing dot.
 */
#include <arpa/inet.h>
#include <string.h>

#include "fuzz_check.h"
#include "policy.h"

static void check_name(const struct policy_host *h)
{
    size_t label = 0;
    CHECK(h->len >= 1 && h->len <= POLICY_HOST_MAX, "name length %zu", h->len);
    for (size_t i = 0; i <= h->len; i++) {
        char c = h->text[i];
        if (i == h->len || c == '.') {
            size_t l = i - label;
            CHECK(l >= 1 && l <= 63, "label of %zu bytes at %zu", l, label);
            CHECK(h->text[label] != '-' && h->text[i - 1] != '-', "hyphen at a label's end");
            if (i < h->len)
                label = i + 1;
            continue;
        }
        CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-', "byte 0x%02x",
              (unsigned char)c);
    }
    const char *last = h->text + label;
    size_t digits = strspn(last, "0123456789");
    CHECK(digits < h->len - label, "all-numeric last label '%s'", last);
    CHECK(!(last[0] == '0' && last[1] == 'x' &&
            strspn(last + 2, "0123456789abcdef") == h->len - label - 2),
          "hex last label '%s'", last);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct policy_host h, again;
    char buf[INET6_ADDRSTRLEN + 2];
    uint8_t a[16];

    if (policy_host_normalize((const char *)data, size, &h) != POLICY_HOST_OK)
        return 0;
    CHECK(strlen(h.text) == h.len, "len %zu vs text '%s'", h.len, h.text);
    CHECK(policy_host_normalize(h.text, h.len, &again) == POLICY_HOST_OK, "'%s' again", h.text);
    CHECK(again.kind == h.kind && again.len == h.len && strcmp(again.text, h.text) == 0 &&
              memcmp(again.addr, h.addr, 16) == 0,
          "'%s' became '%s'", h.text, again.text);
    switch (h.kind) {
    case POLICY_HOST_NAME:
        check_name(&h);
        CHECK(size == h.len || (size == h.len + 1 && data[size - 1] == '.'), "size %zu", size);
        for (size_t i = 0; i < h.len; i++) {
            char c = (char)data[i];
            CHECK((c >= 'A' && c <= 'Z' ? c + 32 : c) == h.text[i], "byte %zu changed", i);
        }
        break;
    case POLICY_HOST_IPV4:
        CHECK(inet_pton(AF_INET, h.text, a) == 1, "inet_pton refuses '%s'", h.text);
        CHECK(memcmp(a, h.addr + 12, 4) == 0, "address differs");
        CHECK(inet_ntop(AF_INET, a, buf, sizeof(buf)) && strcmp(buf, h.text) == 0,
              "'%s' is not inet_ntop's '%s'", h.text, buf);
        break;
    case POLICY_HOST_IPV6:
        CHECK(h.text[0] == '[' && h.text[h.len - 1] == ']', "brackets");
        memcpy(buf, h.text + 1, h.len - 2);
        buf[h.len - 2] = '\0';
        CHECK(inet_pton(AF_INET6, buf, a) == 1 && memcmp(a, h.addr, 16) == 0, "'%s'", h.text);
        break;
    }
    return 0;
}
