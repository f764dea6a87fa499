/* test_creds.c - what sandboxctl accepts from egressd's credentials answer
 * and the environment files it writes from it (creds.h): only placeholders
 * of egressd's exact shape for the sandbox's own secrets go into files a
 * root login shell sources, and only a CA certificate into the trust store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "creds.h"
#include "tap.h"

static const char conf[] = "pve-url https://pve.example:8006\n"
                           "pve-token-file /t\n"
                           "pve-ca-file /ca\n"
                           "template 9000\n"
                           "pool p\n"
                           "bridge b\n"
                           "ip-pool 10.0.0.10-10.0.0.20/24\n"
                           "gateway 10.0.0.1\n"
                           "proxy 10.0.0.1:3128\n"
                           "secret-env github GITHUB_TOKEN\n";

#define PH_A "egressd-ph-anthropic-0123456789abcdef0123456789abcdef"
#define PH_G "egressd-ph-github-fedcba9876543210fedcba9876543210"

/* A self-signed P-256 certificate, a CA when ca is set, as PEM (new). */
static char *make_cert(int ca)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *nm = X509_NAME_new();
    X509_EXTENSION *ext;
    X509V3_CTX ctx;
    BIO *b = BIO_new(BIO_s_mem());
    char *data, *pem;
    long n;

    X509_set_version(x, X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_UTF8, (const unsigned char *)"test CA", -1, -1,
                               0);
    X509_set_subject_name(x, nm);
    X509_set_issuer_name(x, nm);
    X509_set_pubkey(x, key);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints,
                              ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    X509_sign(x, key, EVP_sha256());
    PEM_write_bio_X509(b, x);
    n = BIO_get_mem_data(b, &data);
    pem = malloc((size_t)n + 1);
    memcpy(pem, data, (size_t)n);
    pem[n] = '\0';
    BIO_free(b);
    X509_NAME_free(nm);
    X509_free(x);
    EVP_PKEY_free(key);
    return pem;
}

static struct sbx_meta meta(const char *a, const char *b)
{
    struct sbx_meta m;

    memset(&m, 0, sizeof m);
    strcpy(m.policy, "ai");
    if (a)
        strcpy(m.secrets[m.nsecrets++], a);
    if (b)
        strcpy(m.secrets[m.nsecrets++], b);
    return m;
}

/* Parse answer (JSON text, %s the CA) for m; returns the error ("" on success). */
static const char *parse(const struct sbx_config *c, const struct sbx_meta *m, const char *fmt,
                         const char *ca, struct sbx_creds *cr)
{
    static char err[1024];
    char text[8192];
    json_t *j;

    snprintf(text, sizeof text, fmt, ca);
    j = json_loads(text, 0, NULL);
    err[0] = '\0';
    if (!j)
        snprintf(err, sizeof err, "(the test's JSON is broken)");
    else if (sbx_creds_parse(c, 101, m, j, cr, err, sizeof err) == 0)
        err[0] = '\0';
    json_decref(j);
    return err;
}

/* ca as a JSON string's inside (line breaks as \n). */
static char *json_inside(const char *ca)
{
    json_t *s = json_string(ca);
    char *t = json_dumps(s, JSON_ENCODE_ANY), *inside;

    inside = strdup(t + 1);
    inside[strlen(inside) - 1] = '\0';
    free(t);
    json_decref(s);
    return inside;
}

static void test_parse(const struct sbx_config *c, const char *ca_json, const char *leaf_json)
{
    struct sbx_creds cr;
    struct sbx_meta m = meta("anthropic", "github");
    const char *err;
    char junk[4096];

    err = parse(c, &m,
                "{\"sandbox\":\"101\",\"ca\":\"%s\",\"placeholders\":{\"anthropic\":\"" PH_A
                "\",\"github\":\"" PH_G "\"}}",
                ca_json, &cr);
    ok(err[0] == '\0' && cr.n == 2, "a good answer is taken (%s)", err);
    ok(strcmp(cr.var[0], "ANTHROPIC_API_KEY") == 0 && strcmp(cr.placeholder[0], PH_A) == 0 &&
           strcmp(cr.var[1], "GITHUB_TOKEN") == 0 && strcmp(cr.placeholder[1], PH_G) == 0,
       "each secret's variable (built in, secret-env) with its placeholder, in the sandbox's "
       "order");
    ok(cr.ca_pem && strncmp(cr.ca_pem, "-----BEGIN CERTIFICATE-----\n", 28) == 0, "the CA as PEM");
    sbx_creds_free(&cr);

    snprintf(junk, sizeof junk, "%s\\nexport LD_PRELOAD=/tmp/x.so\\n", ca_json);
    err = parse(c, &m,
                "{\"ca\":\"%s\",\"placeholders\":{\"anthropic\":\"" PH_A "\",\"github\":\"" PH_G
                "\"}}",
                junk, &cr);
    ok(err[0] == '\0' && cr.ca_pem && !strstr(cr.ca_pem, "LD_PRELOAD") &&
           strstr(cr.ca_pem, "-----END CERTIFICATE-----\n") == cr.ca_pem + strlen(cr.ca_pem) - 26,
       "text after the certificate is not carried into the guest (%s)", err);
    sbx_creds_free(&cr);

    static const struct {
        const char *what, *ph_a, *want;
    } bad_ph[] = {
        {"a placeholder with a shell command",
         "egressd-ph-anthropic-0123456789abcdef0123456789abcde$(reboot)", "no valid placeholder"},
        {"another secret's placeholder", "egressd-ph-github-0123456789abcdef0123456789abcdef",
         "no valid placeholder for secret 'anthropic'"},
        {"upper-case hex", "egressd-ph-anthropic-0123456789ABCDEF0123456789abcdef",
         "no valid placeholder"},
        {"31 hex digits", "egressd-ph-anthropic-0123456789abcdef0123456789abcde",
         "no valid placeholder"},
        {"a line break", "egressd-ph-anthropic-0123456789abcdef\\n123456789abcdef",
         "no valid placeholder"},
        {"a real-looking key", "sk-ant-api03-xyz", "no valid placeholder"},
    };
    for (size_t i = 0; i < sizeof bad_ph / sizeof bad_ph[0]; i++) {
        char fmt[1024];
        snprintf(fmt, sizeof fmt,
                 "{\"ca\":\"%%s\",\"placeholders\":{\"anthropic\":\"%s\",\"github\":\"" PH_G "\"}}",
                 bad_ph[i].ph_a);
        err = parse(c, &m, fmt, ca_json, &cr);
        ok(strstr(err, bad_ph[i].want) && cr.n == 0 && !cr.ca_pem, "refused: %s: %s",
           bad_ph[i].what, err);
        sbx_creds_free(&cr);
    }
    err =
        parse(c, &m, "{\"ca\":\"%s\",\"placeholders\":{\"anthropic\":\"" PH_A "\"}}", ca_json, &cr);
    ok(strstr(err, "hold no placeholder for secret 'github'") != NULL,
       "refused: a secret without its placeholder: %s", err);
    m = meta("anthropic", NULL);
    err = parse(c, &m,
                "{\"ca\":\"%s\",\"placeholders\":{\"anthropic\":\"" PH_A "\",\"github\":\"" PH_G
                "\"}}",
                ca_json, &cr);
    ok(strstr(err, "name secret 'github', which the sandbox does not have") != NULL,
       "refused: a placeholder of a secret the sandbox does not have: %s", err);
    err = parse(c, &m, "{\"ca\":null,\"placeholders\":{\"anthropic\":\"" PH_A "\"}%s}", "", &cr);
    ok(strstr(err, "egressd gives sandbox 101 no CA: no inject rule of policy 'ai' binds "
                   "anthropic to a host") != NULL,
       "no CA: the policy binds none of the secrets, said so: %s", err);
    err = parse(c, &m, "{\"ca\":\"%s\",\"placeholders\":{\"anthropic\":\"" PH_A "\"}}", leaf_json,
                &cr);
    ok(strstr(err, "\"ca\" is not a PEM CA certificate") != NULL,
       "refused: a certificate that is not a CA's: %s", err);
    err = parse(c, &m, "{\"ca\":\"%s\",\"placeholders\":{\"anthropic\":\"" PH_A "\"}}",
                "-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\\n", &cr);
    ok(strstr(err, "\"ca\" is not a PEM CA certificate") != NULL,
       "refused: a CA that does not parse: %s", err);
    err = parse(c, &m, "{\"ca\":\"%s\",\"placeholders\":[]}", ca_json, &cr);
    ok(strstr(err, "hold no placeholders object") != NULL, "refused: no placeholders object: %s",
       err);
    sbx_creds_free(&cr);
}

static void test_env_text(void)
{
    struct sbx_creds cr;
    char buf[4096];
    int n;

    memset(&cr, 0, sizeof cr);
    cr.n = 2;
    strcpy(cr.var[0], "ANTHROPIC_API_KEY");
    strcpy(cr.placeholder[0], PH_A);
    strcpy(cr.var[1], "EGRESSD_SECRET_BUILD_CACHE");
    strcpy(cr.placeholder[1], "egressd-ph-build-cache-0123456789abcdef0123456789abcdef");
    n = sbx_creds_env_text(&cr, SBX_CREDS_PROFILE_SH, buf, sizeof buf);
    ok(n > 0 && buf[0] == '#' &&
           strstr(buf, "\nexport ANTHROPIC_API_KEY=" PH_A "\n"
                       "export EGRESSD_SECRET_BUILD_CACHE=egressd-ph-build-cache-"
                       "0123456789abcdef0123456789abcdef\n"
                       "export NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/"
                       "egressd-sandbox.crt\n"
                       "export REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt\n"
                       "export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt\n"
                       "export GIT_SSL_CAINFO=/etc/ssl/certs/ca-certificates.crt\n") &&
           (size_t)n == strlen(buf) && buf[n - 1] == '\n',
       "profile.d: export VAR=PLACEHOLDER per secret, then the CA variables");
    n = sbx_creds_env_text(&cr, SBX_CREDS_ENVIRONMENT_D, buf, sizeof buf);
    ok(n > 0 && !strstr(buf, "export") && strstr(buf, "\nANTHROPIC_API_KEY=" PH_A "\n") &&
           strstr(buf, "\nGIT_SSL_CAINFO=/etc/ssl/certs/ca-certificates.crt\n"),
       "environment.d: VAR=VALUE, without export");
    ok(sbx_creds_env_text(&cr, SBX_CREDS_PROFILE_SH, buf, 300) == -1,
       "a text that does not fit is -1, not a cut file");

    strcpy(cr.var[1], "OPENAI_API_KEY");
    strcpy(cr.placeholder[1], "egressd-ph-openai-0123456789abcdef0123456789abcdef");
    n = sbx_creds_env_text(&cr, SBX_CREDS_PROFILE_SH, buf, sizeof buf);
    ok(n > 0 &&
           strstr(buf,
                  "\nexport OPENAI_API_KEY=egressd-ph-openai-0123456789abcdef0123456789abcdef\n"
                  "export CODEX_API_KEY=egressd-ph-openai-0123456789abcdef0123456789abcdef\n"),
       "OPENAI_API_KEY's placeholder also as CODEX_API_KEY (codex's built-in provider reads that)");
    strcpy(cr.var[0], "CODEX_API_KEY");
    n = sbx_creds_env_text(&cr, SBX_CREDS_ENVIRONMENT_D, buf, sizeof buf);
    ok(n > 0 && strstr(buf, "\nCODEX_API_KEY=" PH_A "\n") &&
           !strstr(buf, "CODEX_API_KEY=egressd-ph-openai"),
       "... but not over a secret that goes into CODEX_API_KEY itself");
}

static void test_check_vars(const struct sbx_config *c)
{
    static const char without_github[] =
        "pve-url https://x\npve-token-file /t\npve-ca-file /ca\ntemplate 9000\npool p\n"
        "bridge b\nip-pool 10.0.0.10-10.0.0.20/24\ngateway 10.0.0.1\nproxy 10.0.0.1:3128\n"
        "secret-env gh GH_TOKEN\n";
    struct sbx_meta m = meta("github", "gh");
    struct sbx_config two;
    char err[512];

    ok(sbx_creds_check_vars(c, &m, err, sizeof err) == 0,
       "github (on GITHUB_TOKEN by secret-env) and gh: two variables");
    ok(sbx_config_parse(&two, without_github, "two.conf", err, sizeof err) == 0, "config (%s)",
       err);
    m = meta("gh", "github");
    ok(sbx_creds_check_vars(&two, &m, err, sizeof err) == -1 &&
           strstr(err, "'gh' and 'github' both go into GH_TOKEN") && strstr(err, "two.conf"),
       "two secrets on one variable (a secret-env line and a built-in name): %s", err);
    m = meta("gh", "anthropic");
    ok(sbx_creds_check_vars(&two, &m, err, sizeof err) == 0,
       "the same config without github asked for: fine");
    sbx_config_free(&two);
}

int main(void)
{
    struct sbx_config c;
    char err[512], *ca = make_cert(1), *leaf = make_cert(0);
    char *ca_json = json_inside(ca), *leaf_json = json_inside(leaf);

    ok(sbx_config_parse(&c, conf, "t.conf", err, sizeof err) == 0, "config (%s)", err);
    test_parse(&c, ca_json, leaf_json);
    test_env_text();
    test_check_vars(&c);
    sbx_config_free(&c);
    free(ca);
    free(leaf);
    free(ca_json);
    free(leaf_json);
    return tap_done();
}
