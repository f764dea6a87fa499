/*
 * placeholder.c - see placeholder.h.
 */
#include "placeholder.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

#include "secrets.h"

#define PREFIX_LEN (sizeof(PX_PLACEHOLDER_PREFIX) - 1)
#define LABEL_MAX  sizeof("refresh-token")

/* The placeholder whose HMAC input starts with `label` (with its NUL);
 * px_placeholder's contract otherwise. */
static size_t make(const char *label, const uint8_t k[PX_PLACEHOLDER_KEY_SIZE],
                   const char *sandbox_id, const char *name, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t msg[LABEL_MAX + 64 + PX_SECRET_NAME_MAX], mac[EVP_MAX_MD_SIZE];
    size_t label_len = strlen(label) + 1;
    size_t id_len = strnlen(sandbox_id, 64), name_len = strnlen(name, PX_SECRET_NAME_MAX + 1);
    size_t len = PREFIX_LEN + name_len + 1 + PX_PLACEHOLDER_HEX;
    unsigned mac_len = 0;

    if (cap > 0)
        out[0] = '\0';
    if (!px_secret_name_ok(name, name_len) || id_len < 1 || id_len > 63 || cap < len + 1)
        return 0;
    /* LABEL NUL ID NUL NAME: the NULs keep (ID, NAME) pairs apart. */
    memcpy(msg, label, label_len); /* with its NUL */
    memcpy(msg + label_len, sandbox_id, id_len + 1);
    memcpy(msg + label_len + id_len + 1, name, name_len);
    if (HMAC(EVP_sha256(), k, PX_PLACEHOLDER_KEY_SIZE, msg, label_len + id_len + 1 + name_len, mac,
             &mac_len) == NULL ||
        mac_len < PX_PLACEHOLDER_HEX / 2)
        return 0;
    memcpy(out, PX_PLACEHOLDER_PREFIX, PREFIX_LEN);
    memcpy(out + PREFIX_LEN, name, name_len);
    out[PREFIX_LEN + name_len] = '-';
    char *h = out + PREFIX_LEN + name_len + 1;
    for (size_t i = 0; i < PX_PLACEHOLDER_HEX / 2; i++) {
        h[2 * i] = hex[mac[i] >> 4];
        h[2 * i + 1] = hex[mac[i] & 15];
    }
    out[len] = '\0';
    return len;
}

size_t px_placeholder(const uint8_t k[PX_PLACEHOLDER_KEY_SIZE], const char *sandbox_id,
                      const char *name, char *out, size_t cap)
{
    return make("placeholder", k, sandbox_id, name, out, cap);
}

size_t px_placeholder_refresh(const uint8_t k[PX_PLACEHOLDER_KEY_SIZE], const char *sandbox_id,
                              const char *name, char *out, size_t cap)
{
    return make("refresh-token", k, sandbox_id, name, out, cap);
}

bool px_placeholder_shape(const char *s, size_t len, const char **name, size_t *name_len)
{
    if (len < PREFIX_LEN + 1 + 1 + PX_PLACEHOLDER_HEX ||
        memcmp(s, PX_PLACEHOLDER_PREFIX, PREFIX_LEN) != 0)
        return false;
    size_t n = len - PREFIX_LEN - 1 - PX_PLACEHOLDER_HEX; /* the name's length */
    const char *h = s + len - PX_PLACEHOLDER_HEX;
    if (h[-1] != '-' || !px_secret_name_ok(s + PREFIX_LEN, n))
        return false;
    for (size_t i = 0; i < PX_PLACEHOLDER_HEX; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return false;
    if (name != NULL) {
        *name = s + PREFIX_LEN;
        *name_len = n;
    }
    return true;
}
