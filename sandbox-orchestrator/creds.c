/* creds.c - check egressd's credentials for a guest and install them (creds.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "creds.h"
#include "guest.h"
#include "homefiles.h"

#define PLACEHOLDER_PREFIX "egressd-ph-"
#define PLACEHOLDER_HEX    32
#define CA_PEM_MAX         16384 /* egressd's is a few KiB at most */
#define ENV_TEXT_MAX       8192
#define LOGIN_FILE_MAX     (16 * 1024) /* a login's guest file, as egressd makes it */

int sbx_creds_check_vars(const struct sbx_config *c, const struct sbx_meta *m, char *err,
                         size_t errlen)
{
    char vars[SBX_META_MAX_SECRETS][SBX_ENV_NAME_MAX];

    for (int i = 0; i < m->nsecrets; i++) {
        sbx_config_secret_env(c, m->secrets[i], vars[i], sizeof vars[i]);
        for (int k = 0; k < i; k++)
            if (strcmp(vars[k], vars[i]) == 0) {
                snprintf(err, errlen,
                         "secrets: '%s' and '%s' both go into %s: give one of them another "
                         "variable (secret-env NAME VAR in %s)",
                         m->secrets[k], m->secrets[i], vars[i], c->path);
                return -1;
            }
    }
    return 0;
}

/* Whether p is exactly the placeholder shape egressd makes for secret
 * name (placeholder.h there): "egressd-ph-" NAME "-" 32 lowercase hex.
 * Nothing else may go into a shell file that root's login shells read. */
static int placeholder_of(const char *p, size_t len, const char *name)
{
    size_t pre = strlen(PLACEHOLDER_PREFIX), n = strlen(name);

    if (len != pre + n + 1 + PLACEHOLDER_HEX || strlen(p) != len ||
        strncmp(p, PLACEHOLDER_PREFIX, pre) != 0 || strncmp(p + pre, name, n) != 0 ||
        p[pre + n] != '-')
        return 0;
    for (const char *h = p + pre + n + 1; *h; h++)
        if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
            return 0;
    return 1;
}

/* The placeholders of m's secrets from the answer's object, each checked;
 * an answer that names another secret is not this sandbox's. */
static int parse_placeholders(const struct sbx_config *c, int vmid, const struct sbx_meta *m,
                              json_t *phs, struct sbx_creds *cr, char *err, size_t errlen)
{
    const char *key;
    json_t *v;

    if (!json_is_object(phs)) {
        snprintf(err, errlen, "egressd's credentials for sandbox %d hold no placeholders object",
                 vmid);
        return -1;
    }
    for (int i = 0; i < m->nsecrets; i++) {
        v = json_object_get(phs, m->secrets[i]);
        if (!json_is_string(v) ||
            !placeholder_of(json_string_value(v), json_string_length(v), m->secrets[i])) {
            snprintf(err, errlen,
                     "egressd's credentials for sandbox %d hold %s placeholder for secret '%s'",
                     vmid, v ? "no valid" : "no", m->secrets[i]);
            return -1;
        }
        sbx_config_secret_env(c, m->secrets[i], cr->var[i], sizeof cr->var[i]);
        snprintf(cr->placeholder[i], sizeof cr->placeholder[i], "%s", json_string_value(v));
    }
    cr->n = m->nsecrets;
    json_object_foreach(phs, key, v)
    {
        int listed = 0;
        for (int i = 0; i < m->nsecrets && !listed; i++)
            listed = strcmp(key, m->secrets[i]) == 0;
        if (!listed) {
            snprintf(err, errlen,
                     "egressd's credentials for sandbox %d name secret '%.64s', which the "
                     "sandbox does not have",
                     vmid, key);
            return -1;
        }
    }
    return 0;
}

/* The providers whose logins egressd keeps. */
static bool provider_known(const char *p)
{
    return strcmp(p, "anthropic") == 0 || strcmp(p, "openai") == 0 || strcmp(p, "google") == 0;
}

/* Secret i's entry of egressd's "secrets" object: a login's provider and
 * guest file into cr (a plain secret: nothing).  The file must be a JSON
 * object holding the access placeholder, and the refresh placeholder must
 * have the shape and differ from it. */
static int parse_login(int vmid, const char *name, json_t *e, struct sbx_creds *cr, int i,
                       char *err, size_t errlen)
{
    const char *kind = json_string_value(json_object_get(e, "kind"));
    const char *prov = json_string_value(json_object_get(e, "provider"));
    json_t *rph = json_object_get(e, "refresh_placeholder"), *file = json_object_get(e, "file");
    json_t *parsed = NULL;

    if (kind != NULL && strcmp(kind, "value") == 0)
        return 0;
    /* (json_is_object evaluates its argument twice: parse first) */
    if (json_is_string(file) && json_string_length(file) <= LOGIN_FILE_MAX)
        parsed = json_loads(json_string_value(file), 0, NULL);
    if (kind == NULL || strcmp(kind, "login") != 0 || prov == NULL || !provider_known(prov) ||
        !json_is_string(rph) ||
        !placeholder_of(json_string_value(rph), json_string_length(rph), name) ||
        strcmp(json_string_value(rph), cr->placeholder[i]) == 0 || !json_is_object(parsed) ||
        strstr(json_string_value(file), cr->placeholder[i]) == NULL) {
        json_decref(parsed);
        snprintf(err, errlen,
                 "egressd's credentials for sandbox %d: secret '%s' is neither a plain secret nor "
                 "a login with a provider, two placeholders and a credentials file",
                 vmid, name);
        return -1;
    }
    json_decref(parsed);
    snprintf(cr->provider[i], sizeof cr->provider[i], "%s", prov);
    cr->login_file[i] = strdup(json_string_value(file));
    if (cr->login_file[i] == NULL)
        abort();
    return 0;
}

/* The kinds of m's secrets from egressd's "secrets" object (an egressd
 * without it: all plain). */
static int parse_logins(int vmid, const struct sbx_meta *m, json_t *each, struct sbx_creds *cr,
                        char *err, size_t errlen)
{
    if (each == NULL)
        return 0;
    for (int i = 0; i < m->nsecrets; i++) {
        json_t *e = json_object_get(each, m->secrets[i]);
        if (!json_is_object(e)) {
            snprintf(err, errlen, "egressd's credentials for sandbox %d say nothing of secret '%s'",
                     vmid, m->secrets[i]);
            return -1;
        }
        if (parse_login(vmid, m->secrets[i], e, cr, i, err, errlen))
            return -1;
    }
    return 0;
}

/* The PEM certificate text pem as a CA certificate, written anew into a
 * new string (only the certificate: whatever else the text held is not
 * carried into the guest's trust store); NULL with err. */
static char *ca_pem_clean(const char *pem, size_t len, int vmid, char *err, size_t errlen)
{
    BIO *in = len <= CA_PEM_MAX ? BIO_new_mem_buf(pem, (int)len) : NULL, *out = NULL;
    X509 *x = in ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
    char *text = NULL, *data;
    long n;

    if (!x || X509_check_ca(x) < 1) {
        snprintf(err, errlen,
                 "egressd's credentials for sandbox %d: \"ca\" is not a PEM CA certificate%s", vmid,
                 len > CA_PEM_MAX ? " (too long)" : "");
    } else if ((out = BIO_new(BIO_s_mem())) && PEM_write_bio_X509(out, x) &&
               (n = BIO_get_mem_data(out, &data)) > 0) {
        text = malloc((size_t)n + 1);
        if (!text)
            abort();
        memcpy(text, data, (size_t)n);
        text[n] = '\0';
    } else {
        snprintf(err, errlen, "sandbox %d: the CA certificate cannot be written as PEM", vmid);
    }
    X509_free(x);
    BIO_free(in);
    BIO_free(out);
    return text;
}

/* The secrets of m as "a, b" into buf. */
static void secret_list(const struct sbx_meta *m, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < m->nsecrets && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", m->secrets[i]);
}

int sbx_creds_parse(const struct sbx_config *c, int vmid, const struct sbx_meta *m, json_t *answer,
                    struct sbx_creds *cr, char *err, size_t errlen)
{
    json_t *ca = json_object_get(answer, "ca");
    char names[SBX_META_MAX_SECRETS * SBX_SECRET_NAME_MAX];

    memset(cr, 0, sizeof *cr);
    if (parse_placeholders(c, vmid, m, json_object_get(answer, "placeholders"), cr, err, errlen) ||
        parse_logins(vmid, m, json_object_get(answer, "secrets"), cr, err, errlen))
        goto fail;
    if (!json_is_string(ca)) {
        secret_list(m, names, sizeof names);
        snprintf(err, errlen,
                 "egressd gives sandbox %d no CA: no inject rule of policy '%s' binds %s to a "
                 "host, so no request would get %s (choose a policy whose preset has `HOST inject "
                 "... secret NAME` lines, or leave the secret out)",
                 vmid, m->policy, names, m->nsecrets > 1 ? "them" : "it");
        goto fail;
    }
    cr->ca_pem = ca_pem_clean(json_string_value(ca), json_string_length(ca), vmid, err, errlen);
    if (cr->ca_pem)
        return 0;
fail:
    sbx_creds_free(cr);
    return -1;
}

void sbx_creds_free(struct sbx_creds *cr)
{
    for (int i = 0; i < SBX_META_MAX_SECRETS; i++)
        free(cr->login_file[i]);
    free(cr->ca_pem);
    memset(cr, 0, sizeof *cr);
}

/* Variables a CLI reads in place of a secret's own: codex's built-in
 * provider takes its key from CODEX_API_KEY (or its auth.json) and ignores
 * OPENAI_API_KEY. */
static const char *const var_aliases[][2] = {
    {"OPENAI_API_KEY", "CODEX_API_KEY"},
};

/* Whether some secret of cr goes into variable var itself. */
static bool has_var(const struct sbx_creds *cr, const char *var)
{
    for (int i = 0; i < cr->n; i++)
        if (strcmp(cr->var[i], var) == 0)
            return true;
    return false;
}

/* The alias of variable var that cr's file also sets, or NULL. */
static const char *alias_of(const struct sbx_creds *cr, const char *var)
{
    for (size_t k = 0; k < sizeof var_aliases / sizeof var_aliases[0]; k++)
        if (strcmp(var_aliases[k][0], var) == 0 && !has_var(cr, var_aliases[k][1]))
            return var_aliases[k][1];
    return NULL;
}

int sbx_creds_env_text(const struct sbx_creds *cr, enum sbx_creds_form form, char *buf, size_t len)
{
    static const char *const ca_vars[][2] = {
        {"NODE_EXTRA_CA_CERTS", SBX_CREDS_CA_FILE},
        {"REQUESTS_CA_BUNDLE", SBX_CREDS_BUNDLE},
        {"SSL_CERT_FILE", SBX_CREDS_BUNDLE},
        {"GIT_SSL_CAINFO", SBX_CREDS_BUNDLE},
    };
    const char *export = form == SBX_CREDS_PROFILE_SH ? "export " : "";
    size_t used = 0;

    /* The values are placeholders of a checked shape and fixed paths: no
     * quoting is needed in either form.  snprintf's counts add up past
     * len when the text does not fit, which the end tells. */
    used += (size_t)snprintf(
        buf, len,
        "# written by sandboxctl: credential injection through egressd.  These are\n"
        "# placeholders, not keys: egressd puts the real key into requests to the\n"
        "# hosts it is bound to, and refuses a placeholder sent anywhere else.\n");
    for (int i = 0; used < len && i < cr->n; i++) {
        const char *alias = alias_of(cr, cr->var[i]);
        used += (size_t)snprintf(buf + used, len - used, "%s%s=%s\n", export, cr->var[i],
                                 cr->placeholder[i]);
        if (alias != NULL && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s=%s\n", export, alias,
                                     cr->placeholder[i]);
    }
    for (size_t i = 0; used < len && i < sizeof ca_vars / sizeof ca_vars[0]; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s=%s\n", export, ca_vars[i][0],
                                 ca_vars[i][1]);
    return used < len ? (int)used : -1;
}

/* Write text into the guest at path; err "PATH: why". */
static int put_file(struct sbx *s, const char *node, int vmid, const char *path, const char *text,
                    char *err, size_t errlen)
{
    char why[1024];

    if (sbx_guest_write(s, node, vmid, path, (const unsigned char *)text, strlen(text), why,
                        sizeof why) == 0)
        return 0;
    snprintf(err, errlen, "%s: %s", path, why);
    return -1;
}

/* Run a step's script as root in the guest; err starts with what, also
 * when the agent call itself failed (sbx_guest_script names it only when
 * the script ran and failed). */
static int script(struct sbx *s, const char *node, int vmid, const char *what, const char *text,
                  const char *const *args, char *err, size_t errlen)
{
    char why[1024];

    if (sbx_guest_script(s, node, vmid, what, text, args, s->cfg.exec_timeout_ms, NULL, why,
                         sizeof why) == 0)
        return 0;
    if (strncmp(why, what, strlen(what)) == 0)
        snprintf(err, errlen, "%s", why);
    else
        snprintf(err, errlen, "%s: %s", what, why);
    return -1;
}

/* The CA's base64 without line breaks into buf: what the bundle must hold
 * once update-ca-certificates has run, however it wraps the lines. */
static int ca_body(const char *pem, char *buf, size_t len)
{
    const char *p = strchr(pem, '\n');
    size_t n = 0;

    for (p = p ? p + 1 : pem; *p && *p != '-'; p++)
        if (*p != '\n' && *p != '\r') {
            if (n + 1 >= len)
                return -1;
            buf[n++] = *p;
        }
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

/* After the files: root's, 0644 (an existing file keeps its mode through
 * file-write), then the trust store, and the check that the bundle holds
 * the CA (update-ca-certificates skips a file it cannot read as one). */
static int trust(struct sbx *s, const char *node, int vmid, const struct sbx_creds *cr, char *err,
                 size_t errlen)
{
    static const char modes[] = "chown 0:0 -- \"$@\" && chmod 0644 -- \"$@\"";
    static const char update[] =
        "update-ca-certificates >/dev/null || exit 1\n"
        "tr -d '\\r\\n' < \"$1\" | grep -qF -- \"$2\" && exit 0\n"
        "echo \"$1 does not hold the sandbox CA after update-ca-certificates\" >&2; exit 1";
    const char *files[] = {SBX_CREDS_CA_FILE, SBX_CREDS_PROFILE, SBX_CREDS_ENV_FILE, NULL};
    char body[CA_PEM_MAX];
    const char *args[] = {SBX_CREDS_BUNDLE, body, NULL};

    if (ca_body(cr->ca_pem, body, sizeof body)) {
        snprintf(err, errlen, "the CA certificate holds no base64 body");
        return -1;
    }
    if (script(s, node, vmid, "file modes (chown 0:0, chmod 0644)", modes, files, err, errlen))
        return -1;
    return script(s, node, vmid, "update-ca-certificates", update, args, err, errlen);
}

int sbx_creds_install(struct sbx *s, const char *node, int vmid, const struct sbx_creds *cr,
                      char *err, size_t errlen)
{
    static const char dirs[] = "mkdir -p -m 0755 -- \"$@\"";
    const char *dir_args[] = {"/usr/local/share/ca-certificates", SBX_CREDS_ENV_DIR, NULL};
    char profile[ENV_TEXT_MAX], envd[ENV_TEXT_MAX];

    if (sbx_creds_env_text(cr, SBX_CREDS_PROFILE_SH, profile, sizeof profile) < 0 ||
        sbx_creds_env_text(cr, SBX_CREDS_ENVIRONMENT_D, envd, sizeof envd) < 0) {
        snprintf(err, errlen, "the environment files are longer than %d bytes", ENV_TEXT_MAX);
        return -1;
    }
    if (script(s, node, vmid, "directories", dirs, dir_args, err, errlen) ||
        put_file(s, node, vmid, SBX_CREDS_CA_FILE, cr->ca_pem, err, errlen) ||
        put_file(s, node, vmid, SBX_CREDS_PROFILE, profile, err, errlen) ||
        put_file(s, node, vmid, SBX_CREDS_ENV_FILE, envd, err, errlen) ||
        trust(s, node, vmid, cr, err, errlen))
        return -1;
    return sbx_home_files_install(s, node, vmid, cr, err, errlen);
}
