/* pve.c - the Proxmox VE API client: token, TLS check, JSON calls, lock retries. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "pve.h"

#define TOKEN_MAX          512
#define BODY_MAX           (128L * 1024 * 1024) /* 16 MiB read on PVE 8 as JSON escapes: up to 96 MiB */
#define LOCK_RETRIES       6
#define LOCK_FIRST_MS      250
#define CONNECT_TIMEOUT_MS 10000L

/* What the verify callback needs: the pin, and room to say what it saw. */
struct pin_check {
    unsigned char want[32];
    char seen[65];
    int mismatch;
};

struct sbx_pve {
    CURL *curl;
    char *base;           /* https://HOST:PORT/api2/json */
    char *auth;           /* "Authorization: PVEAPIToken=..." */
    char *ca_file;        /* or ... */
    struct pin_check pin; /* ... have_pin */
    int have_pin;
    int anonymous; /* this exchange is a person's sign-in: no API token */
    long timeout_ms;
    long last_status;
    int timed_out;   /* the last exchange ran out of http-timeout */
    size_t body_max; /* this exchange's cap on the answer: BODY_MAX or less */
    unsigned long requests;
    int debug;
    /* the answer being received */
    char *body;
    size_t body_len, body_cap; /* body_cap: bytes allocated, the NUL's included */
    int body_over;
    char reason[256];
    char curl_err[CURL_ERROR_SIZE];
};

volatile sig_atomic_t sbx_cancel;

void sbx_msleep(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !sbx_cancel)
        ;
}

long sbx_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

char *sbx_pve_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1), *o = out;

    if (!out)
        abort();
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || strchr("-._~", *p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

/* Read the token ("USER@REALM!TOKENID=SECRET") from path; the file must
 * be a regular file that no group or other user may read. */
static int read_token(const char *path, char *tok, size_t cap, char *err, size_t errlen)
{
    struct stat st;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

    if (fd == -1) {
        snprintf(err, errlen, "pve-token-file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "pve-token-file %s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(err, errlen,
                 "pve-token-file %s: mode %04o lets other users read the API token; it must be "
                 "0600 (fix: chmod 600 %s)",
                 path, (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return -1;
    }
    n = read(fd, tok, cap);
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "pve-token-file %s: %s", path, strerror(errno));
        return -1;
    }
    if ((size_t)n == cap) {
        /* Cut short, the secret would fail only later, as a slow 401. */
        explicit_bzero(tok, cap);
        snprintf(err, errlen, "pve-token-file %s: longer than %zu bytes: not one token line", path,
                 cap - 1);
        return -1;
    }
    tok[n] = '\0';
    while (n > 0 && isspace((unsigned char)tok[n - 1]))
        tok[--n] = '\0';
    return 0;
}

/* A token line must look like USER@REALM!TOKENID=SECRET and hold nothing
 * that could break the header it goes into. */
static int check_token(const char *path, const char *tok, char *err, size_t errlen)
{
    const char *at = strchr(tok, '@'), *bang = strchr(tok, '!'), *eq = strrchr(tok, '=');

    for (const char *p = tok; *p; p++)
        if (!isgraph((unsigned char)*p)) {
            snprintf(err, errlen, "pve-token-file %s: the token holds a blank or control byte",
                     path);
            return -1;
        }
    if (!at || !bang || !eq || at > bang || bang > eq || eq[1] == '\0') {
        snprintf(err, errlen,
                 "pve-token-file %s: expected one line USER@REALM!TOKENID=SECRET "
                 "(e.g. sandboxctl@pve!ctl=aaaaaaaa-bbbb-...)",
                 path);
        return -1;
    }
    return 0;
}

static int pin_index(void)
{
    static int idx = -1;

    if (idx == -1)
        idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    return idx;
}

/* OpenSSL's verify callback when a fingerprint is pinned: the leaf
 * certificate (depth 0) is accepted exactly when its SHA-256 equals the
 * pin, whatever the chain says; nothing else decides. */
static int on_verify_pin(int preverify_ok, X509_STORE_CTX *store)
{
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct pin_check *pin = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), pin_index());
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    (void)preverify_ok;
    if (!pin || !cert)
        return 0;
    if (X509_STORE_CTX_get_error_depth(store) > 0) {
        /* The chain above the leaf is not what is trusted; the pin is. */
        X509_STORE_CTX_set_error(store, X509_V_OK);
        return 1;
    }
    if (!X509_digest(cert, EVP_sha256(), md, &mdlen) || mdlen != 32)
        return 0;
    for (unsigned i = 0; i < 32; i++)
        snprintf(pin->seen + 2 * i, 3, "%02x", md[i]);
    if (memcmp(md, pin->want, 32) != 0) {
        pin->mismatch = 1;
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
        return 0;
    }
    X509_STORE_CTX_set_error(store, X509_V_OK);
    return 1;
}

static CURLcode on_ssl_ctx(CURL *curl, void *sslctx, void *arg)
{
    SSL_CTX *ctx = sslctx;

    (void)curl;
    SSL_CTX_set_ex_data(ctx, pin_index(), arg);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, on_verify_pin);
    return CURLE_OK;
}

/* The answer's bytes are appended to p->body, kept NUL-terminated.  The
 * buffer at least doubles when it grows: a 16 MiB file-read arrives in
 * some 1 500 pieces of 16 KiB, and growing by each piece would copy the
 * answer that many times over (a realloc under AddressSanitizer always
 * copies: tens of seconds for one answer). */
static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sbx_pve *p = arg;
    size_t n = size * nmemb, need;

    if (p->body_len + n > p->body_max) {
        p->body_over = 1;
        return 0;
    }
    need = p->body_len + n + 1;
    if (need > p->body_cap) {
        size_t cap = p->body_cap * 2 > need ? p->body_cap * 2 : need;
        char *grown;
        if (cap > p->body_max + 1)
            cap = p->body_max + 1;
        grown = realloc(p->body, cap);
        if (!grown)
            abort();
        p->body = grown;
        p->body_cap = cap;
    }
    memcpy(p->body + p->body_len, data, n);
    p->body_len += n;
    p->body[p->body_len] = '\0';
    return n;
}

/* Keep the reason phrase of the status line: Proxmox puts its message there. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sbx_pve *p = arg;
    size_t n = size * nmemb;

    if (n > 9 && strncmp(data, "HTTP/", 5) == 0) {
        const char *sp = memchr(data, ' ', n);
        const char *end = data + n;
        if (sp && end - sp > 5) {
            size_t len = (size_t)(end - (sp + 5));
            if (len >= sizeof p->reason)
                len = sizeof p->reason - 1;
            memcpy(p->reason, sp + 5, len);
            while (len > 0 && (p->reason[len - 1] == '\r' || p->reason[len - 1] == '\n'))
                len--;
            p->reason[len] = '\0';
        }
    }
    return n;
}

/* Every TLS option must take: a libcurl that ignored one (the SSL_CTX
 * callback needs the OpenSSL backend) would check less than configured,
 * so a refusal fails the client.  0, or -1 with err. */
static int setup_tls(struct sbx_pve *p, const struct sbx_config *c, char *err, size_t errlen)
{
    CURL *h = p->curl;
    CURLcode rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);

    if (c->have_pin) {
        memcpy(p->pin.want, c->pin, 32);
        p->have_pin = 1;
        /* The pin names one exact certificate, so the host name adds nothing;
         * the verify callback still refuses every other certificate. */
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSL_CTX_DATA, &p->pin);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_CAINFO, c->pve_ca_file);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    if (rc != CURLE_OK) {
        snprintf(err, errlen,
                 "%s: this libcurl cannot check the server's certificate as configured: %s",
                 c->have_pin ? "pve-fingerprint" : "pve-ca-file", curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

struct sbx_pve *sbx_pve_new(const struct sbx_config *c, char *err, size_t errlen)
{
    char tok[TOKEN_MAX];
    struct sbx_pve *p;
    size_t n;

    if (read_token(c->pve_token_file, tok, sizeof tok, err, errlen) ||
        check_token(c->pve_token_file, tok, err, errlen))
        return NULL;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    p = calloc(1, sizeof *p);
    if (!p)
        abort();
    p->curl = curl_easy_init();
    if (!p->curl)
        abort();
    n = strlen(c->pve_url);
    while (n > 0 && c->pve_url[n - 1] == '/')
        n--;
    if (asprintf(&p->base, "%.*s%s", (int)n, c->pve_url,
                 n >= 10 && strncmp(c->pve_url + n - 10, "/api2/json", 10) == 0
                     ? ""
                     : "/api2/json") < 0 ||
        asprintf(&p->auth, "Authorization: PVEAPIToken=%s",
                 strncmp(tok, "PVEAPIToken=", 12) == 0 ? tok + 12 : tok) < 0)
        abort();
    explicit_bzero(tok, sizeof tok);
    p->timeout_ms = c->http_timeout_ms;
    p->debug = getenv("SANDBOXCTL_DEBUG") != NULL;
    curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(p->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(p->curl, CURLOPT_PROXY, "");
    curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(p->curl, CURLOPT_TIMEOUT_MS, p->timeout_ms);
    curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, p);
    curl_easy_setopt(p->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(p->curl, CURLOPT_HEADERDATA, p);
    curl_easy_setopt(p->curl, CURLOPT_ERRORBUFFER, p->curl_err);
    if (curl_easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "https") != CURLE_OK) {
        snprintf(err, errlen, "pve-url: this libcurl cannot restrict itself to https");
        sbx_pve_free(p);
        return NULL;
    }
    if (setup_tls(p, c, err, errlen)) {
        sbx_pve_free(p);
        return NULL;
    }
    return p;
}

void sbx_pve_free(struct sbx_pve *p)
{
    if (!p)
        return;
    curl_easy_cleanup(p->curl);
    if (p->auth)
        explicit_bzero(p->auth, strlen(p->auth));
    free(p->auth);
    free(p->base);
    free(p->body);
    free(p);
}

long sbx_pve_last_status(const struct sbx_pve *p)
{
    return p->last_status;
}

int sbx_pve_timed_out(const struct sbx_pve *p)
{
    return p->timed_out;
}

unsigned long sbx_pve_requests(const struct sbx_pve *p)
{
    return p->requests;
}

/* Append "k=v&" for each member of params (GET/DELETE). */
static char *build_query(json_t *params)
{
    const char *key;
    json_t *v;
    char *q = strdup(""), *next;

    if (!q)
        abort();
    json_object_foreach(params, key, v)
    {
        char num[64];
        const char *raw = num;
        char *ek, *ev;
        if (json_is_string(v))
            raw = json_string_value(v);
        else if (json_is_integer(v))
            snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_boolean(v))
            snprintf(num, sizeof num, "%d", json_is_true(v));
        else if (json_is_real(v))
            snprintf(num, sizeof num, "%.17g", json_real_value(v));
        else
            continue;
        ek = sbx_pve_escape(key);
        ev = sbx_pve_escape(raw);
        if (asprintf(&next, "%s%s%s=%s", q, *q ? "&" : "", ek, ev) < 0)
            abort();
        free(ek);
        free(ev);
        free(q);
        q = next;
    }
    return q;
}

static int is_lock_error(const char *msg)
{
    return strstr(msg, "VM is locked") ||
           (strstr(msg, "can't lock file") && strstr(msg, "got timeout"));
}

/* Compose the error line from the status, reason phrase and body. */
static void describe_error(struct sbx_pve *p, const char *method, const char *path, json_t *doc,
                           char *err, size_t errlen)
{
    json_t *msg = json_object_get(doc, "message"), *errors = json_object_get(doc, "errors");
    size_t n;
    const char *key;
    json_t *v;

    n = (size_t)snprintf(err, errlen, "%s %s: %ld %s", method, path, p->last_status, p->reason);
    if (json_is_string(msg) && n < errlen) {
        char m[512];
        snprintf(m, sizeof m, "%s", json_string_value(msg));
        m[strcspn(m, "\n")] = '\0';
        if (strcmp(m, p->reason) != 0 && strstr(p->reason, m) == NULL)
            n += (size_t)snprintf(err + n, errlen - n, ": %s", m);
    }
    if (json_is_object(errors) && n < errlen) {
        const char *sep = " (";
        json_object_foreach(errors, key, v)
        {
            if (n >= errlen)
                break;
            n += (size_t)snprintf(err + n, errlen - n, "%s%s: %s", sep, key,
                                  json_is_string(v) ? json_string_value(v) : "invalid");
            sep = "; ";
        }
        if (n < errlen)
            snprintf(err + n, errlen - n, ")");
    }
    /* Messages end with a newline in Proxmox; keep one line. */
    for (char *c = err; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

/* One HTTP exchange; returns 0 with the decoded body in *doc (may be NULL
 * for an empty or non-JSON body), or -1 on a transport failure. */
static int exchange(struct sbx_pve *p, const char *method, const char *path, json_t *params,
                    json_t **doc, char *err, size_t errlen)
{
    int body = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
    char *query = NULL, *url, *payload = NULL;
    struct curl_slist *hdr = NULL;
    CURLcode rc;

    if (!body && params && json_object_size(params) > 0)
        query = build_query(params);
    if (asprintf(&url, "%s%s%s%s", p->base, path, query ? "?" : "", query ? query : "") < 0)
        abort();
    free(query);
    if (!p->anonymous)
        hdr = curl_slist_append(hdr, p->auth);
    hdr = curl_slist_append(hdr, "Accept: application/json");
    if (body) {
        payload = params ? json_dumps(params, JSON_COMPACT) : strdup("{}");
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
    }
    free(p->body);
    p->body = NULL;
    p->body_len = p->body_cap = 0;
    p->body_over = 0;
    p->reason[0] = '\0';
    p->pin.mismatch = 0;
    p->curl_err[0] = '\0';
    curl_easy_setopt(p->curl, CURLOPT_URL, url);
    curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, hdr);
    if (body) {
        curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
        curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, payload);
    } else {
        curl_easy_setopt(p->curl, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(p->curl, CURLOPT_CUSTOMREQUEST, method);
    p->requests++;
    rc = curl_easy_perform(p->curl);
    curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdr);
    if (payload && p->anonymous)
        explicit_bzero(payload, strlen(payload)); /* it holds a password */
    free(payload);
    free(url);
    p->last_status = 0;
    p->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    if (rc != CURLE_OK) {
        if (p->pin.mismatch)
            snprintf(err, errlen,
                     "%s %s: the server's certificate has SHA-256 fingerprint %s, which is not the "
                     "pinned pve-fingerprint: refusing to talk to it",
                     method, path, p->pin.seen);
        else if (p->body_over)
            snprintf(err, errlen, "%s %s: answer larger than %zu bytes", method, path, p->body_max);
        else
            snprintf(err, errlen, "%s %s: %s", method, path,
                     p->curl_err[0] ? p->curl_err : curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &p->last_status);
    *doc = p->body ? json_loadb(p->body, p->body_len, JSON_ALLOW_NUL, NULL) : NULL;
    /* The text is not needed once parsed: a large answer is not held twice
     * until the next exchange. */
    if (p->body && p->anonymous)
        explicit_bzero(p->body, p->body_len); /* it holds a ticket */
    free(p->body);
    p->body = NULL;
    p->body_len = p->body_cap = 0;
    if (p->debug)
        fprintf(stderr, "sandboxctl: %s %s -> %ld %s\n", method, path, p->last_status, p->reason);
    return 0;
}

int sbx_pve_call(struct sbx_pve *p, const char *method, const char *path, json_t *params,
                 json_t **data, char *err, size_t errlen)
{
    return sbx_pve_call_max(p, method, path, params, 0, data, err, errlen);
}

int sbx_pve_call_max(struct sbx_pve *p, const char *method, const char *path, json_t *params,
                     size_t body_max, json_t **data, char *err, size_t errlen)
{
    long wait = LOCK_FIRST_MS;

    p->body_max = body_max > 0 && body_max < (size_t)BODY_MAX ? body_max : (size_t)BODY_MAX;

    if (data)
        *data = NULL;
    for (int attempt = 1;; attempt++) {
        json_t *doc = NULL;
        if (exchange(p, method, path, params, &doc, err, errlen))
            return -1;
        if (p->last_status >= 200 && p->last_status < 300) {
            if (data) {
                json_t *d = json_object_get(doc, "data");
                *data = d ? json_incref(d) : json_null();
            }
            json_decref(doc);
            return 0;
        }
        describe_error(p, method, path, doc, err, errlen);
        json_decref(doc);
        if (!is_lock_error(err) || attempt == LOCK_RETRIES || sbx_cancel)
            return -1;
        if (p->debug)
            fprintf(stderr, "sandboxctl: locked, retrying in %ld ms\n", wait);
        sbx_msleep(wait);
        wait *= 2;
    }
}

int sbx_pve_ticket(struct sbx_pve *p, json_t *params, json_t **data, char *err, size_t errlen)
{
    json_t *doc = NULL;
    int rc = -1;

    *data = NULL;
    p->anonymous = 1;
    p->body_max = BODY_MAX;
    if (exchange(p, "POST", "/access/ticket", params, &doc, err, errlen) == 0) {
        if (p->last_status >= 200 && p->last_status < 300 &&
            json_is_object(json_object_get(doc, "data"))) {
            *data = json_incref(json_object_get(doc, "data"));
            rc = 0;
        } else {
            describe_error(p, "POST", "/access/ticket", doc, err, errlen);
        }
    }
    json_decref(doc);
    if (p->body)
        explicit_bzero(p->body, p->body_len); /* it holds a ticket */
    p->anonymous = 0;
    return rc;
}
