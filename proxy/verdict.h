/*
 * verdict.h - the words egressd's log lines, metrics and deny answers share
 * (docs/design.md, "Access log"): how a connection came in (mode) and why it was
 * decided as it was (reason).  The policy's own reasons come first, in the
 * order of enum policy_reason, so one cast maps them.
 */
#ifndef PX_VERDICT_H
#define PX_VERDICT_H

#include "policy.h"

enum px_mode {
    PX_MODE_CONNECT,   /* explicit proxy, CONNECT tunnel */
    PX_MODE_HTTP,      /* explicit proxy, absolute-URI request */
    PX_MODE_TLS,       /* transparent TLS, decided on the SNI */
    PX_MODE_PLAIN,     /* transparent HTTP, decided on Host */
    PX_MODE_INTERCEPT, /* a request inside a CONNECT egressd terminates (intercept.c) */
    PX_MODE_COUNT
};

enum px_reason {
    PX_R_ALLOWED = POLICY_R_ALLOWED,
    PX_R_NOT_ALLOWED = POLICY_R_NOT_ALLOWED,
    PX_R_DENY_RULE = POLICY_R_DENY_RULE,
    PX_R_PRIVATE_RANGE = POLICY_R_PRIVATE_RANGE,
    PX_R_GEO = POLICY_R_GEO,
    PX_R_BAD_HOST = POLICY_R_BAD_HOST,
    PX_R_METHOD_NOT_ALLOWED = POLICY_R_METHOD_NOT_ALLOWED,
    PX_R_PATH_NOT_ALLOWED = POLICY_R_PATH_NOT_ALLOWED,
    PX_R_PUSH_NOT_ALLOWED = POLICY_R_PUSH_NOT_ALLOWED,
    PX_R_SNI_MISMATCH, /* the ClientHello names another host than CONNECT */
    PX_R_NO_SNI,       /* no server_name, and no `ip` rule allows the literal */
    PX_R_NOT_TLS,      /* a CONNECT (not `raw`) or TLS port that did not open with a hello */
    PX_R_ECH,          /* encrypted_client_hello, with `ech deny` */
    PX_R_BAD_REQUEST,  /* a malformed or ambiguous request: 400 */
    PX_R_DNS_FAIL,     /* the name did not resolve */
    PX_R_CONNECT_FAIL, /* no checked address accepted the connection */
    PX_R_TIMEOUT,      /* header, connect, idle or tunnel-life timeout */
    PX_R_LIMIT,        /* max-conns, per-sandbox limits, quota, rate, lookups */
    PX_R_REVOKED, /* open when its binding went away, expired or the policy stopped allowing it */
    PX_R_CREDENTIAL_HOST_MISMATCH, /* a secret's placeholder sent where the secret is not bound */
    PX_R_UPSTREAM_TLS,             /* an intercepted origin's certificate did not verify */
    PX_R_CREDENTIAL_METHOD,        /* a method that may echo a credential (TRACE, ...) */
    PX_R_CREDENTIAL_REFLECTED,     /* an intercepted origin sent a secret back: cut */
    PX_R_OAUTH_FOREIGN_TOKEN,      /* a token request without the sandbox's refresh placeholder */
    PX_R_COUNT
};

/* Who ended a connection: the access log's termination field says it,
 * with the phase (docs/design.md, "Access log"). */
enum px_end {
    PX_END_NONE,     /* nobody yet: the connection stays open for the next request */
    PX_END_CLIENT,   /* the client closed, reset or failed */
    PX_END_UPSTREAM, /* the origin closed or failed (or did not resolve, or refused) */
    PX_END_PROXY,    /* egressd: a denial, a bad request, shutting down */
    PX_END_TIMEOUT,  /* a header, connect, idle, lookup or life timeout */
    PX_END_LIMIT,    /* a connection, rate, lookup or byte limit */
    PX_END_REVOKED,  /* its binding or policy changed under it */
    PX_END_COUNT
};

/* Who ends a connection that ends with reason r, where nothing more
 * precise was noted (px_conn_ended). */
static inline enum px_end px_end_of_reason(enum px_reason r)
{
    switch (r) {
    case PX_R_TIMEOUT: return PX_END_TIMEOUT;
    case PX_R_LIMIT: return PX_END_LIMIT;
    case PX_R_REVOKED: return PX_END_REVOKED;
    case PX_R_DNS_FAIL:
    case PX_R_CONNECT_FAIL:
    case PX_R_UPSTREAM_TLS: return PX_END_UPSTREAM;
    default: return PX_END_PROXY;
    }
}

static inline const char *px_end_str(enum px_end e)
{
    static const char *const words[PX_END_COUNT] = {"none",    "client", "upstream", "proxy",
                                                    "timeout", "limit",  "revoked"};
    return (unsigned)e < PX_END_COUNT ? words[e] : "?";
}

/* Whether a rule can have decided reason r (the policy's own reasons, and
 * a revocation by a rule): only then do the log and the answer name one. */
static inline bool px_reason_has_rule(enum px_reason r)
{
    return r <= PX_R_PUSH_NOT_ALLOWED || r == PX_R_REVOKED;
}

static inline const char *px_mode_str(enum px_mode m)
{
    static const char *const words[PX_MODE_COUNT] = {"connect", "http", "tls", "plain",
                                                     "intercept"};
    return (unsigned)m < PX_MODE_COUNT ? words[m] : "?";
}

static inline const char *px_reason_str(enum px_reason r)
{
    static const char *const words[PX_R_COUNT] = {
        [PX_R_ALLOWED] = "allowed",
        [PX_R_NOT_ALLOWED] = "not_allowed",
        [PX_R_DENY_RULE] = "deny_rule",
        [PX_R_PRIVATE_RANGE] = "private_range",
        [PX_R_GEO] = "geo",
        [PX_R_BAD_HOST] = "bad_host",
        [PX_R_METHOD_NOT_ALLOWED] = "method_not_allowed",
        [PX_R_PATH_NOT_ALLOWED] = "path_not_allowed",
        [PX_R_PUSH_NOT_ALLOWED] = "push_not_allowed",
        [PX_R_SNI_MISMATCH] = "sni_mismatch",
        [PX_R_NO_SNI] = "no_sni",
        [PX_R_NOT_TLS] = "not_tls",
        [PX_R_ECH] = "ech",
        [PX_R_BAD_REQUEST] = "bad_request",
        [PX_R_DNS_FAIL] = "dns_fail",
        [PX_R_CONNECT_FAIL] = "connect_fail",
        [PX_R_TIMEOUT] = "timeout",
        [PX_R_LIMIT] = "limit",
        [PX_R_REVOKED] = "revoked",
        [PX_R_CREDENTIAL_HOST_MISMATCH] = "credential_host_mismatch",
        [PX_R_UPSTREAM_TLS] = "upstream_tls",
        [PX_R_CREDENTIAL_METHOD] = "credential_method",
        [PX_R_CREDENTIAL_REFLECTED] = "credential_reflected",
        [PX_R_OAUTH_FOREIGN_TOKEN] = "oauth_foreign_token",
    };
    return (unsigned)r < PX_R_COUNT && words[r] != NULL ? words[r] : "?";
}

#endif
