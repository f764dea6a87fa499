#!/usr/bin/env python3
"""oauthd.py - a fake OAuth provider for egressd's tests of the OAuth logins
it keeps: one HTTPS server that is, for one --provider, both its token
endpoint and an API that wants the access tokens it issued.

    oauthd.py --provider anthropic|openai|google --listen ADDR:PORT
              --cert PEM --key KEY --log FILE --client-id ID
              [--client-secret S] [--lifetime SECONDS] [--first-lifetime SECONDS]
              [--seed-state FILE] [--mode-file FILE] [--notify FILE] [--slow SECONDS]
              [--current FILE]

Token endpoint (POST; anthropic /v1/oauth/token and openai /oauth/token take
JSON, google /token a form): only grant_type=refresh_token (else 400
unsupported_grant_type), client_id = --client-id and for google
client_secret = --client-secret (else 401 invalid_client), a refresh token
issued here and still valid (else 400 invalid_grant).  It answers a new
access token living --lifetime seconds (10) -- anthropic
"sk-ant-oat01-REAL-...", openai a JWT with "exp" and
"https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT}, google
"ya29.REAL-..." -- and (not google) a new refresh token "REALREFRESH-...";
openai's id_token has "email": EMAIL and the same auth claims.  A refresh
token stays valid until the one issued from it has been used once (a grace).

Any other path is the API: "Authorization: Bearer T", T an unexpired access
token issued here, gets 200 {"ok": true, "n": the request's number}, else 401
{"error": "expired"}; google's /tokeninfo (GET or, as google-auth-library
asks, POST; bearer or ?access_token=) answers {"expires_in", "scope",
"exp", "aud", "azp"}.  Bodies go by
Content-Length; a Transfer-Encoding gets 411, a bad Content-Length 400, and
the connection closes.

--seed-state FILE: at start, a first pair issued here, living
--first-lifetime seconds (0: already expired), as {"access", "refresh",
"expires_ms"} (openai: also "id_token", "account_id").  --mode-file FILE,
read at each token request, one word (missing or empty: ok): ok, notjson
(200 "<html>oops</html>"), missing (200 {"token_type":"Bearer"}), 500 (500
server_error), slow (--slow seconds, 30, then as ok), refuse (400
invalid_grant); others get 500 bad_mode.  --notify FILE: "answered N"
appended once the N-th token answer is written and flushed.  --log FILE: one
JSON line per request, written before its answer: {"n", "t", "path",
"method", "kind": "token"|"api", "grant_type", "refresh_token", "client_id",
"content_type", "bearer", "status", "result", "mode"}, full values, plus
"access_token" and "new_refresh_token" when it issued them.  Prints "ready"
once it listens.
"""

import argparse
import base64
import json
import os
import secrets
import threading
import time
from urllib.parse import parse_qs, urlsplit

import tlsserver

TOKEN_PATH = {"anthropic": "/v1/oauth/token", "openai": "/oauth/token", "google": "/token"}
BODY_TYPE = {"anthropic": "application/json", "openai": "application/json",
             "google": "application/x-www-form-urlencoded"}
SCOPE = {"anthropic": "user:inference user:profile", "openai": "openid profile email",
         "google": "https://www.googleapis.com/auth/cloud-platform "
                   "https://www.googleapis.com/auth/userinfo.email "
                   "https://www.googleapis.com/auth/userinfo.profile openid"}
ACCOUNT, EMAIL = "acct-fake-0001", "user@example.test"
AUTH = {"https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT, "chatgpt_plan_type": "pro",
                                        "chatgpt_user_id": "user-fake0001"}}

args = None
lock = threading.Lock()          # the token state and the counters
log_lock = threading.Lock()
access = {}                      # access token -> its expiry (epoch seconds)
refresh = {}                     # valid refresh token -> the one it was issued from
current = []                     # --current: the access tokens issued last, newest first
counts = {"requests": 0, "answered": 0}


def log(**kv):
    kv["t"] = round(time.time(), 3)
    line = json.dumps(kv, sort_keys=True) + "\n"
    with log_lock, open(args.log, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwt(claims):
    """A JWT in form: base64url header.payload, a random signature."""
    part = lambda o: b64url(json.dumps(o, separators=(",", ":")).encode())
    return "%s.%s.%s" % (part({"alg": "RS256", "typ": "JWT", "kid": "fake"}), part(claims),
                         b64url(secrets.token_bytes(32)))


def id_token():
    now = int(time.time())
    return jwt(dict(AUTH, iss="https://auth.openai.com", aud=args.client_id, sub="user-fake0001",
                    email=EMAIL, email_verified=True, iat=now, exp=now + 3600))


def issue(lifetime, parent=None, new_refresh=True):
    """A new access token living lifetime seconds, and a refresh token issued
    from parent (None when new_refresh is false): (access, refresh, expiry)."""
    now = time.time()
    exp = now + lifetime
    if args.provider == "anthropic":
        tok = "sk-ant-oat01-REAL-" + secrets.token_urlsafe(32)
    elif args.provider == "google":
        tok = "ya29.REAL-" + secrets.token_urlsafe(32)
    else:
        exp = int(exp)
        tok = jwt(dict(AUTH, iss="https://auth.openai.com", aud=["https://api.openai.com/v1"],
                       client_id=args.client_id, iat=int(now), exp=exp, jti=secrets.token_hex(8)))
    rt = "REALREFRESH-" + secrets.token_urlsafe(32) if new_refresh else None
    with lock:
        access[tok] = exp
        if rt:
            refresh[rt] = parent
        if args.current:
            current.insert(0, tok)
            del current[2:]
            with open(args.current + ".new", "w", encoding="utf-8") as f:
                f.write("\n".join(current) + "\n")
            os.replace(args.current + ".new", args.current)
    return tok, rt, exp


def use_refresh(rt):
    """Whether rt is valid; its first use ends the grace of its parent."""
    with lock:
        if not isinstance(rt, str) or rt not in refresh:
            return False
        parent = refresh[rt]
        if parent is not None:
            refresh.pop(parent, None)
            refresh[rt] = None
        return True


def token_body(tok, rt):
    if args.provider == "openai":
        return {"id_token": id_token(), "access_token": tok, "refresh_token": rt}
    body = {"token_type": "Bearer", "access_token": tok, "expires_in": args.lifetime,
            "scope": SCOPE[args.provider]}
    return dict(body, refresh_token=rt) if rt else body


def read_mode():
    try:
        with open(args.mode_file, encoding="utf-8") as f:
            return f.read().strip() or "ok"
    except (OSError, TypeError):
        return "ok"


def notify():
    with lock:
        counts["answered"] += 1
        n = counts["answered"]
        if args.notify:
            with open(args.notify, "a", encoding="utf-8") as f:
                f.write("answered %d\n" % n)
                f.flush()


def fail(e, status, error, result=None):
    e["result"] = result or error
    return status, {"error": error}


class Handler(tlsserver.Handler):

    def answer(self, status, obj):
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if isinstance(obj, bytes)
                         else "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def read_body(self):
        """(body, None), or (None, (status, answer, result)) for a body it
        cannot read (the connection is then closed)."""
        if self.headers.get("Transfer-Encoding") is not None:
            return None, (411, {"error": "length_required"}, "chunked")
        n = self.headers.get("Content-Length") or "0"
        if not n.isdigit() or int(n) > 1 << 20:
            return None, (400, {"error": "invalid_request"}, "bad_length")
        return self.rfile.read(int(n)), None

    def handle_any(self):
        with lock:
            counts["requests"] += 1
            n = counts["requests"]
        url = urlsplit(self.path)
        kind = "token" if url.path == TOKEN_PATH[args.provider] else "api"
        h = self.headers.get("Authorization") or ""
        bearer = h[7:].strip() if h[:7].lower() == "bearer " else None
        e = dict(n=n, path=self.path, method=self.command, kind=kind, grant_type=None,
                 refresh_token=None, client_id=None, bearer=bearer,
                 content_type=self.headers.get("Content-Type"))
        body, err = self.read_body()
        if err:
            status, obj, e["result"] = err
            self.close_connection = True
        elif kind == "token":
            status, obj = self.token(body, e)
        else:
            status, obj = self.api(url, e)
        e["status"] = status
        log(**e)
        self.answer(status, obj)
        if kind == "token":
            notify()

    def token(self, body, e):
        if self.command != "POST":
            return fail(e, 405, "invalid_request", "method")
        e["mode"] = mode = read_mode()
        if mode == "slow":
            time.sleep(args.slow)
        form = None
        if (e["content_type"] or "").split(";")[0].strip().lower() == BODY_TYPE[args.provider]:
            try:
                if args.provider == "google":
                    form = {k: v[0] for k, v in
                            parse_qs(body.decode(), keep_blank_values=True).items()}
                else:
                    form = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                pass
        if isinstance(form, dict):
            e.update(grant_type=form.get("grant_type"), refresh_token=form.get("refresh_token"),
                     client_id=form.get("client_id"))
        canned = {"notjson": (200, b"<html>oops</html>"),
                  "missing": (200, {"token_type": "Bearer"}),
                  "500": (500, {"error": "server_error"}),
                  "refuse": (400, {"error": "invalid_grant"})}
        e["result"] = mode
        if mode in canned:
            return canned[mode]
        if mode not in ("ok", "slow"):
            return fail(e, 500, "bad_mode")
        if not isinstance(form, dict):
            return fail(e, 400, "invalid_request", "bad_body")
        if form.get("grant_type") != "refresh_token":
            return fail(e, 400, "unsupported_grant_type")
        if form.get("client_id") != args.client_id or (
                args.provider == "google" and form.get("client_secret") != args.client_secret):
            return fail(e, 401, "invalid_client")
        if not use_refresh(form.get("refresh_token")):
            return fail(e, 400, "invalid_grant")
        tok, rt, _ = issue(args.lifetime, form["refresh_token"], args.provider != "google")
        e.update(result="issued", access_token=tok, new_refresh_token=rt)
        return 200, token_body(tok, rt)

    def api(self, url, e):
        tok = e["bearer"]
        info = args.provider == "google" and url.path == "/tokeninfo"
        if tok is None and info:
            tok = (parse_qs(url.query).get("access_token") or [None])[0]
        with lock:
            exp = access.get(tok)
        now = time.time()
        e["result"] = ("absent" if tok is None else "unknown" if exp is None
                       else "expired" if now >= exp else "ok")
        if e["result"] != "ok":
            return 401, {"error": "expired"}
        if info:
            return 200, {"expires_in": int(exp - now), "scope": SCOPE["google"],
                         "exp": str(int(exp)), "aud": args.client_id, "azp": args.client_id}
        return 200, {"ok": True, "n": e["n"]}

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", required=True, choices=sorted(TOKEN_PATH))
    ap.add_argument("--listen", required=True, metavar="ADDR:PORT")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--client-secret")
    ap.add_argument("--lifetime", type=int, default=10, metavar="SECONDS")
    ap.add_argument("--first-lifetime", type=int, metavar="SECONDS")
    ap.add_argument("--seed-state", metavar="FILE")
    ap.add_argument("--mode-file", metavar="FILE")
    ap.add_argument("--notify", metavar="FILE")
    ap.add_argument("--slow", type=float, default=30, metavar="SECONDS")
    ap.add_argument("--current", metavar="FILE",
                    help="the access tokens issued last and the one before it, a line each, "
                         "rewritten at each issue (another fake API, e.g. fakeapi.py "
                         "--anthropic-key FILE, takes either: a rotated token stays good "
                         "until it lapses)")
    args = ap.parse_args()
    if args.provider == "google" and args.client_secret is None:
        ap.error("--provider google needs --client-secret")
    if args.first_lifetime is None:
        args.first_lifetime = args.lifetime
    if args.seed_state:
        tok, rt, exp = issue(args.first_lifetime)
        seed = {"access": tok, "refresh": rt, "expires_ms": int(exp * 1000)}
        if args.provider == "openai":
            seed.update(id_token=id_token(), account_id=ACCOUNT)
        with open(args.seed_state, "w", encoding="utf-8") as f:
            f.write(json.dumps(seed) + "\n")
    addr, _, port = args.listen.rpartition(":")
    srv = tlsserver.Server((addr.strip("[]"), int(port)), Handler, args.cert, args.key,
                           alpn=["http/1.1"])
    print("ready", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
