/* creds.h - the guest's side of credential injection (docs/credentials.md).
 *
 * A sandbox with secrets holds placeholders, never keys.  Once egressd has
 * bound it, its answer to GET /v1/sandboxes/{id}/credentials (egress.h) is
 * checked here and installed through the guest agent, all files root's and
 * mode 0644 (the agent user must read them; nothing in them is a secret):
 *
 *   /usr/local/share/ca-certificates/egressd-sandbox.crt
 *       the sandbox CA, then update-ca-certificates puts it into the
 *       combined bundle /etc/ssl/certs/ca-certificates.crt (checked);
 *   /etc/profile.d/egressd-credentials.sh
 *       `export VAR=PLACEHOLDER` per secret (and for OPENAI_API_KEY also
 *       CODEX_API_KEY, which codex's built-in provider reads instead) and
 *       the CA variables: what a login shell reads (bash -l, ssh, su -,
 *       sudo -i);
 *   /etc/environment.d/90-egressd-credentials.conf
 *       the same as VAR=VALUE lines: what the systemd user manager gives
 *       every user service (environment.d(5));
 *   in guest-user's home, what each CLI reads there (homefiles.h): a
 *       login's credentials file, codex's auth.json for an OpenAI key.
 *
 * The CA variables point the tools that keep their own trust list at the
 * bundle or the CA: NODE_EXTRA_CA_CERTS (the CA file: Node adds it to its
 * built-in list), REQUESTS_CA_BUNDLE, SSL_CERT_FILE and GIT_SSL_CAINFO (the
 * bundle).  npm's cafile is in /etc/npmrc, written with the proxy settings
 * (ops_create.c).
 */
#ifndef SBX_CREDS_H
#define SBX_CREDS_H

#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "meta.h"
#include "sbx.h"

#define SBX_CREDS_CA_FILE  "/usr/local/share/ca-certificates/egressd-sandbox.crt"
#define SBX_CREDS_BUNDLE   "/etc/ssl/certs/ca-certificates.crt"
#define SBX_CREDS_PROFILE  "/etc/profile.d/egressd-credentials.sh"
#define SBX_CREDS_ENV_DIR  "/etc/environment.d"
#define SBX_CREDS_ENV_FILE SBX_CREDS_ENV_DIR "/90-egressd-credentials.conf"
/* "egressd-ph-" NAME "-" 32 hex digits, and its NUL */
#define SBX_CREDS_PLACEHOLDER_MAX (11 + SBX_SECRET_NAME_MAX + 32 + 1)

/* What a guest is given: the variable and placeholder of each secret, in
 * the order of the sandbox's metadata, and the CA. */
struct sbx_creds {
    int n;
    char var[SBX_META_MAX_SECRETS][SBX_ENV_NAME_MAX];
    char placeholder[SBX_META_MAX_SECRETS][SBX_CREDS_PLACEHOLDER_MAX];
    char *ca_pem; /* the CA certificate, PEM written anew from its parse */
    /* An OAuth login egressd keeps (docs/credentials.md, "Subscription
     * logins"): its provider ("" for a plain secret) and the CLI's
     * credentials file egressd made for the guest, placeholders only
     * (NULL for a plain secret). */
    char provider[SBX_META_MAX_SECRETS][16];
    char *login_file[SBX_META_MAX_SECRETS];
};

/* The form of an environment file. */
enum sbx_creds_form {
    SBX_CREDS_PROFILE_SH,    /* `export VAR=VALUE`, for /etc/profile.d */
    SBX_CREDS_ENVIRONMENT_D, /* `VAR=VALUE`, for environment.d */
};

/* Whether the secrets of m map to distinct variables (secret-env and the
 * built-in names): 0, or -1 naming the two secrets and their variable. */
int sbx_creds_check_vars(const struct sbx_config *c, const struct sbx_meta *m, char *err,
                         size_t errlen);

/* Check egressd's credentials answer for sandbox vmid with metadata m, and
 * fill cr: a placeholder of the exact shape egressd makes for each of m's
 * secrets and for no other, and a CA certificate (a sandbox whose secrets
 * no inject rule of its policy binds to a host gets none: an error that
 * says so).  0, or -1 with err; cr is then empty.  sbx_creds_free() it. */
int sbx_creds_parse(const struct sbx_config *c, int vmid, const struct sbx_meta *m, json_t *answer,
                    struct sbx_creds *cr, char *err, size_t errlen);

/* Release what cr holds; a zeroed cr is fine. */
void sbx_creds_free(struct sbx_creds *cr);

/* The environment file of cr in form into buf (len bytes, NUL-terminated);
 * returns its length, or -1 when it does not fit. */
int sbx_creds_env_text(const struct sbx_creds *cr, enum sbx_creds_form form, char *buf, size_t len);

/* Install cr in the guest of VM vmid on node (see the top of this file).
 * 0, or -1 with err "STEP: why" (STEP names the file or the command). */
int sbx_creds_install(struct sbx *s, const char *node, int vmid, const struct sbx_creds *cr,
                      char *err, size_t errlen);

#endif
