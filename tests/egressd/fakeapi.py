#!/usr/bin/env python3
"""fakeapi.py - a local stand-in for the Anthropic and OpenAI HTTP APIs, and
the Google Code Assist API that gemini-cli calls with a Google login,
behind egressd's credential injection (inject-tools.t, agents*.t).

    fakeapi.py --log FILE --certs DIR --anthropic-key FILE --openai-key FILE
               [--delay SECONDS] [--last-delay SECONDS] [--text TEXT]
               [--chatgpt-account ID] [--google-key FILE]
               NAME=ADDR:PORT...

For every NAME=ADDR:PORT it serves HTTPS on ADDR:PORT with DIR/NAME.pem
(key DIR/NAME.key).  HTTP/1.1 with keep-alive, one thread per connection.

Endpoints (the key files are read at each request, one trailing newline
dropped; any line of any file given for an API is a key, as a rotated token
stays good until it lapses and one API takes several kinds of token; a
request without one gets the API's own 401):
    POST /v1/messages               Anthropic Messages: needs the key, in
                                    x-api-key or (as @anthropic-ai/sdk 1.x
                                    sends it) Authorization: Bearer, and
                                    anthropic-version; with "stream": true a
                                    text/event-stream of a canned message
                                    (message_start ... message_stop), else
                                    the message as JSON
    POST /v1/messages/count_tokens  {"input_tokens": 12}
    POST /v1/chat/completions       OpenAI Chat Completions (Bearer): with
                                    "stream": true chat.completion.chunk
                                    events then [DONE], else the completion
    POST /v1/responses              OpenAI Responses (Bearer): with "stream":
                                    true response.created ...
                                    response.completed, else the response
    GET  /v1/responses, Upgrade     the Responses API over a WebSocket, as
                                    codex's built-in provider speaks it
                                    (below)
    GET  /v1/models                 a list of one model of each API
    POST /backend-api/codex/responses, and its Upgrade
                                    the Responses API as codex speaks it
                                    with a ChatGPT login (the same as
                                    /v1/responses)
    GET  /backend-api/wham/accounts/check
                                    codex's workspace discovery with a
                                    ChatGPT login (Bearer): the one account
                                    --chatgpt-account ID, on chatgpt.com;
                                    a ChatGPT-Account-ID other than ID
                                    gets 403
    POST /v1internal:METHOD         Code Assist (Bearer, --google-key): as
                                    gemini-cli calls it with a Google login:
                                    loadCodeAssist (a free tier, onboarded,
                                    its project), retrieveUserQuota,
                                    listExperiments, generateContent (the
                                    answer as JSON; asked for JSON, the
                                    model router's score),
                                    streamGenerateContent
                                    (?alt=sse: the answer's pieces as
                                    events)
    GET  /oauth2/v2/userinfo        the Google account (Bearer, --google-key)
    POST /v1beta/models/M:generateContent, M:streamGenerateContent,
         /v1beta1/publishers/google/models/M:... the same
                                    the Gemini API as gemini-cli calls it
                                    with GEMINI_API_KEY, and Vertex AI as it
                                    calls it with GOOGLE_API_KEY (both in
                                    x-goog-api-key,
                                    --google-key): the same answers, not
                                    wrapped as Code Assist wraps them
    anything else                   404, logged
Every answer says TEXT (--text; "Hello from the fake API.").  The events of
a stream go out --delay seconds apart (0.25), one chunk each; the last
one --last-delay seconds after the one before it (the same by default).

The Responses API over a WebSocket (RFC 6455, wsproto.py): a GET of
/v1/responses with "Upgrade: websocket" and the key as a Bearer
Authorization (codex also sends "OpenAI-Beta: responses_websockets=
2026-02-06" and offers permessage-deflate; neither is needed, none is
accepted).  A wrong or absent key gets the 401 of HTTP, without the
upgrade; else 101 Switching Protocols (no other field is needed).  Then
each text message {"type": "response.create", ...the body of a POST
/v1/responses...} gets the events of the HTTP stream, one text message
each (their JSON, the "data:" of the stream), paced as the stream is,
from response.created to response.completed; the connection stays open
for the next response.create (codex sends its turn on the connection it
opened at startup).  One with "generate": false (codex's warm-up at
startup, with no input) gets only response.created and
response.completed, at once, with no output.  Other messages (e.g.
response.processed) get no answer; text that is not JSON gets an
{"type": "error", "status": 400} event.  Pings are answered, a close is
answered and ends the connection.

The log (--log) gets one JSON line per request, {"event": "request",
"site", "method", "path", "api", "auth": "match" | "mismatch" | "absent",
"auth_field" (x-api-key, x-goog-api-key or authorization),
"auth_sha256" (of the credential value seen, 16 hex digits, never the value),
"placeholder" (whether the value looked like egressd's placeholder),
"anthropic_version", "user_agent", "account" (ChatGPT-Account-ID), "stream",
"model", "status", "n": the request's number, "ws": false, "warmup": false}, and one per event of a
stream, {"event": "sent", "n", "i", "kind", "t"} (the send time), then
{"event": "done", "n", "events", "t"}.  Over a WebSocket: the upgrade
is a request line with "ws": true, "method": "GET", "stream": false and
status 101 (or 401, 400, 426); each response.create on it is a request
line of its own, "ws": true, "method": "WS", "upgrade": the upgrade's n,
the upgrade's auth fields, "stream": true, "warmup" ("generate": false),
"previous_response_id", status 200, then its sent and done lines as for
a stream (none for a warm-up); any other message {"event": "ws_message",
"n": the upgrade's, "type"}; the end {"event": "ws_end", "n": the
upgrade's, "by": "client" (its close), "eof" or "error", "code"}.
Prints "ready" once every socket listens.
"""

import argparse
import hashlib
import json
import sys
import threading
import time

import tlsserver
import wsproto

args = None
log_lock = threading.Lock()
counter = [0]


def log(**kv):
    kv.setdefault("t", round(time.time(), 3))
    with log_lock:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(kv, sort_keys=True) + "\n")


def next_n():
    """The next request number."""
    with log_lock:
        counter[0] += 1
        return counter[0]


def read_key(paths):
    """The keys of the files paths, one a line (a file's last newline
    dropped)."""
    keys = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            v = f.read()
        keys += (v[:-1] if v.endswith("\n") else v).split("\n")
    return keys


def gemini_response(text, finish=None, wrapped=True):
    """A GenerateContentResponse with text; wrapped: as Code Assist sends it."""
    cand = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    r = {"candidates": [cand], "modelVersion": "gemini-fake",
         "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 9,
                           "totalTokenCount": 21}}
    return {"response": r, "traceId": "trace-fake01"} if wrapped else r


def gemini_events(wrapped):
    pieces = chunks(args.text)
    return [(None, gemini_response(p, "STOP" if i == len(pieces) - 1 else None, wrapped))
            for i, p in enumerate(pieces)]


# Where the Gemini API's methods live: Google AI Studio's and Vertex AI's
# express mode (an API key, no project).
GEMINI_MODELS = ("/v1beta/models/", "/v1beta1/publishers/google/models/")


def gemini_method(path):
    """(Gemini method, wrapped) of a Code Assist or Gemini API path, or
    (None, None): /v1internal:M, GEMINI_MODELS + MODEL:M."""
    if path.startswith("/v1internal:"):
        return path.partition(":")[2], True
    if path.startswith(GEMINI_MODELS) and path.count(":") == 1:
        return path.partition(":")[2], False
    return None, None


# Code Assist's answers but the generation, by method.
GOOGLE_PROJECT = "fake-project-0001"
CODE_ASSIST = {
    "loadCodeAssist": {"currentTier": {"id": "free-tier", "name": "Gemini Code Assist (fake)",
                                       "hasOnboardedPreviously": True},
                       "cloudaicompanionProject": GOOGLE_PROJECT},
    "retrieveUserQuota": {"buckets": []},
    "listExperiments": {"experimentIds": [], "flags": []},
}
# A request for JSON (generationConfig.responseMimeType) is gemini-cli's
# model router asking how hard the prompt is: its schema's answer.
ROUTER_ANSWER = {"complexity_reasoning": "A greeting.", "complexity_score": 1}
USERINFO = {"id": "100000000000000000001", "email": "user@example.test", "verified_email": True}


def chunks(text, n=4):
    """text in n pieces (at word boundaries where there are enough words)."""
    words = text.split(" ")
    if len(words) < n:
        return [text]
    size = -(-len(words) // n)
    parts = [" ".join(words[i:i + size]) for i in range(0, len(words), size)]
    return [p + (" " if i < len(parts) - 1 else "") for i, p in enumerate(parts)]


def anthropic_events(model):
    text = args.text
    msg = {"id": "msg_fake01", "type": "message", "role": "assistant", "model": model,
           "content": [], "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": 12, "output_tokens": 1}}
    ev = [("message_start", {"type": "message_start", "message": msg}),
          ("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}}),
          ("ping", {"type": "ping"})]
    for piece in chunks(text):
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": piece}}))
    ev += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
           ("message_delta", {"type": "message_delta",
                              "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                              "usage": {"output_tokens": 9}}),
           ("message_stop", {"type": "message_stop"})]
    return ev


def anthropic_message(model):
    return {"id": "msg_fake01", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": args.text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 9}}


def chat_events(model):
    base = {"id": "chatcmpl-fake01", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}
    ev = [(None, dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None}]))]
    for piece in chunks(args.text):
        ev.append((None, dict(base, choices=[{"index": 0, "delta": {"content": piece},
                                              "finish_reason": None}])))
    ev.append((None, dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])))
    ev.append((None, "[DONE]"))
    return ev


def chat_completion(model):
    return {"id": "chatcmpl-fake01", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": args.text}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}}


def response_obj(model, status, output, rid="resp_fake01"):
    return {"id": rid, "object": "response", "created_at": int(time.time()),
            "status": status, "model": model, "output": output, "error": None,
            "incomplete_details": None,
            "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 21}}


def responses_events(model, rid="resp_fake01"):
    item_id = "msg_fake01"
    done_item = {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": args.text, "annotations": []}]}
    seq = [0]

    def e(kind, **kv):
        seq[0] += 1
        return (kind, dict(type=kind, sequence_number=seq[0], **kv))

    ev = [e("response.created", response=response_obj(model, "in_progress", [], rid)),
          e("response.in_progress", response=response_obj(model, "in_progress", [], rid)),
          e("response.output_item.added", output_index=0,
            item={"type": "message", "id": item_id, "status": "in_progress", "role": "assistant",
                  "content": []}),
          e("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
            part={"type": "output_text", "text": "", "annotations": []})]
    for piece in chunks(args.text):
        ev.append(e("response.output_text.delta", item_id=item_id, output_index=0,
                    content_index=0, delta=piece))
    ev += [e("response.output_text.done", item_id=item_id, output_index=0, content_index=0,
             text=args.text),
           e("response.content_part.done", item_id=item_id, output_index=0, content_index=0,
             part={"type": "output_text", "text": args.text, "annotations": []}),
           e("response.output_item.done", output_index=0, item=done_item),
           e("response.completed", response=response_obj(model, "completed", [done_item], rid))]
    return ev


def warmup_events(model, rid):
    """A response.create with "generate": false: created, then completed
    with no output."""
    return [("response.created", {"type": "response.created", "sequence_number": 1,
                                  "response": response_obj(model, "in_progress", [], rid)}),
            ("response.completed", {"type": "response.completed", "sequence_number": 2,
                                    "response": response_obj(model, "completed", [], rid)})]


# codex with a ChatGPT login calls the Responses API under chatgpt.com's
# backend: the same API by another path.
CHATGPT_RESPONSES = "/backend-api/codex/responses"
ACCOUNTS_CHECK = "/backend-api/wham/accounts/check"


def api_path(path):
    """The /v1 path that path serves."""
    return "/v1/responses" if path == CHATGPT_RESPONSES else path


def accounts_check(account):
    """codex's workspace discovery answer: one personal account, routed to
    chatgpt.com itself."""
    return {"accounts": [{"id": account, "workspace_backend_origin": "https://chatgpt.com",
                          "account_routing_override": "NO_CONSTRAINT", "plan_type": "pro",
                          "structure": "personal"}],
            "account_ordering": [account], "default_account_id": account}


class Handler(tlsserver.Handler):

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def json_answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 200:
            self.send_header("request-id", "req_fake01")
        self.end_headers()
        self.wfile.write(body)

    def stream(self, n, events):
        """events as a text/event-stream, one chunk each, --delay apart."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, (kind, data) in enumerate(events):
            if i:
                time.sleep(args.last_delay if i == len(events) - 1 else args.delay)
            text = data if isinstance(data, str) else json.dumps(data)
            ev = ("event: %s\n" % kind if kind else "") + "data: %s\n\n" % text
            raw = ev.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()
            log(event="sent", n=n, i=i, kind=kind, t=round(time.time(), 3))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        log(event="done", n=n, events=len(events))

    def auth(self, api):
        """(flag, credential value, its field) for api's key file: the
        Anthropic key in x-api-key or a Bearer Authorization, OpenAI's in a
        Bearer Authorization, Google's in x-goog-api-key or a Bearer
        Authorization."""
        h = self.headers.get("authorization")
        got, field = (h[len("Bearer "):] if h and h.startswith("Bearer ") else h), "authorization"
        if api == "anthropic":
            want = read_key(args.anthropic_key)
            if self.headers.get("x-api-key") is not None:
                got, field = self.headers.get("x-api-key"), "x-api-key"
        elif api == "google":
            want = read_key(args.google_key)
            if self.headers.get("x-goog-api-key") is not None:
                got, field = self.headers.get("x-goog-api-key"), "x-goog-api-key"
        else:
            want = read_key(args.openai_key)
        if got is None:
            return "absent", None, None
        return ("match" if got in want else "mismatch"), got, field

    def handle_api(self, method):
        n = next_n()
        path = api_path(self.path.split("?")[0])
        method_g, _ = gemini_method(path)
        api = ("google" if method_g or path == "/oauth2/v2/userinfo" else
               "anthropic" if path.startswith("/v1/messages") else "openai")
        if method == "GET" and path == "/v1/responses" and wsproto.is_upgrade(self.headers):
            return self.websocket(n)
        body = self.read_body() if method == "POST" else b""
        try:
            req = json.loads(body) if body else {}
        except ValueError:
            req = {}
        if not isinstance(req, dict):
            req = {}
        flag, got, field = self.auth(api)
        entry = dict(event="request", n=n, site=self.server.site, method=method, path=self.path,
                     api=api, auth=flag, auth_field=field,
                     auth_sha256=hashlib.sha256(got.encode()).hexdigest()[:16] if got else None,
                     placeholder=bool(got and got.startswith("egressd-ph-")),
                     anthropic_version=self.headers.get("anthropic-version"),
                     user_agent=self.headers.get("user-agent"),
                     account=self.headers.get("chatgpt-account-id"), stream=bool(req.get("stream")),
                     model=req.get("model"), ws=False, warmup=False)
        known = {("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens"),
                 ("POST", "/v1/chat/completions"), ("POST", "/v1/responses"),
                 ("GET", "/v1/models")}
        if args.chatgpt_account:
            known.add(("GET", ACCOUNTS_CHECK))
        if args.google_key:
            known |= {("POST", "/v1internal:" + m) for m in CODE_ASSIST}
            known |= {("POST", "/v1internal:generateContent"),
                      ("POST", "/v1internal:streamGenerateContent"), ("GET", "/oauth2/v2/userinfo")}
            if method_g in ("generateContent", "streamGenerateContent"):
                known.add((method, path))
        if (method, path) not in known:
            log(status=404, **entry)
            return self.json_answer(404, {"error": {"type": "not_found_error",
                                                    "message": "no such endpoint"}})
        if flag != "match":
            log(status=401, **entry)
            return self.unauthorized(api)
        if api == "anthropic" and not self.headers.get("anthropic-version"):
            log(status=400, **entry)
            return self.json_answer(400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "anthropic-version: header is required"}})
        if path == ACCOUNTS_CHECK:
            if entry["account"] != args.chatgpt_account:
                log(status=403, **entry)
                return self.json_answer(403, {"detail": "account mismatch"})
            log(status=200, **entry)
            return self.json_answer(200, accounts_check(args.chatgpt_account))
        log(status=200, **entry)
        if api == "google":
            return self.google(n, path, req)
        model = req.get("model") or "fake-model"
        if path == "/v1/models":
            return self.json_answer(200, {"object": "list", "data": [
                {"id": "claude-fake", "object": "model", "type": "model", "created": 0,
                 "owned_by": "fake", "display_name": "Claude (fake)"},
                {"id": "gpt-fake", "object": "model", "created": 0, "owned_by": "fake"}]})
        if path == "/v1/messages/count_tokens":
            return self.json_answer(200, {"input_tokens": 12})
        stream = bool(req.get("stream"))
        if path == "/v1/messages":
            return self.stream(n, anthropic_events(model)) if stream else \
                self.json_answer(200, anthropic_message(model))
        if path == "/v1/chat/completions":
            return self.stream(n, chat_events(model)) if stream else \
                self.json_answer(200, chat_completion(model))
        done = {"type": "message", "id": "msg_fake01", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": args.text, "annotations": []}]}
        return self.stream(n, responses_events(model)) if stream else \
            self.json_answer(200, response_obj(model, "completed", [done]))

    def google(self, n, path, req):
        """Code Assist's or the Gemini API's method, or the account's info,
        authorized."""
        method, wrapped = gemini_method(path)
        if method == "streamGenerateContent":
            return self.stream(n, gemini_events(wrapped))
        if method == "generateContent":
            config = (req.get("request") if wrapped else req) or {}
            config = config.get("generationConfig") or {}
            text = (json.dumps(ROUTER_ANSWER) if config.get("responseMimeType") ==
                    "application/json" else args.text)
            return self.json_answer(200, gemini_response(text, "STOP", wrapped))
        return self.json_answer(200, CODE_ASSIST[method] if method else USERINFO)

    def unauthorized(self, api):
        """The API's own 401."""
        if api == "anthropic":
            return self.json_answer(401, {"type": "error", "error": {
                "type": "authentication_error", "message": "invalid x-api-key"}})
        if api == "google":
            return self.json_answer(401, {"error": {
                "code": 401, "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED"}})
        return self.json_answer(401, {"error": {
            "message": "Incorrect API key provided", "type": "invalid_request_error",
            "param": None, "code": "invalid_api_key"}})

    def websocket(self, n):
        """GET /v1/responses with Upgrade: the key check, the handshake,
        then the Responses API over the WebSocket until it ends."""
        flag, got, field = self.auth("openai")
        auth = dict(site=self.server.site, path=self.path, api="openai", auth=flag,
                    auth_field=field,
                    auth_sha256=hashlib.sha256(got.encode()).hexdigest()[:16] if got else None,
                    placeholder=bool(got and got.startswith("egressd-ph-")),
                    anthropic_version=None, user_agent=self.headers.get("user-agent"),
                    account=self.headers.get("chatgpt-account-id"), ws=True)
        entry = dict(auth, event="request", n=n, method="GET", stream=False, model=None,
                     warmup=False)
        if flag != "match":
            log(status=401, **entry)
            return self.unauthorized("openai")
        try:
            key = wsproto.check_upgrade(self.command, self.headers, self.request_version)
        except wsproto.HandshakeError as e:
            log(status=e.status, **entry)
            self.close_connection = True
            body = json.dumps({"error": {"message": e.reason, "type": "invalid_request_error",
                                         "param": None, "code": None}}).encode()
            self.send_response(e.status)
            for k, v in e.headers:
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        log(status=101, **entry)
        self.close_connection = True
        self.wfile.write(wsproto.handshake_response(key))
        self.request.settimeout(300)
        ws = wsproto.WebSocket(self.rfile.read1, self.wfile.write)
        end = dict(event="ws_end", n=n, by="eof", code=None)
        try:
            while True:
                msg = ws.recv()
                if msg.kind == "close":
                    end.update(by="client", code=msg.code)
                    break
                if msg.kind in ("text", "binary"):
                    self.ws_message(ws, n, auth, msg)
        except wsproto.ProtocolError as e:
            end.update(by="error", code=e.code)
        except wsproto.ConnectionClosed:
            pass
        except (OSError, ValueError) as e:
            end.update(by="error", error=type(e).__name__)
        log(**end)

    def ws_message(self, ws, n, auth, msg):
        """One client message on the WebSocket of upgrade n."""
        try:
            req = json.loads(msg.data) if msg.kind == "text" else None
        except ValueError:
            req = None
        if not isinstance(req, dict):
            log(event="ws_message", n=n, type=None)
            ws.send_text(json.dumps({"type": "error", "status": 400, "error": {
                "type": "invalid_request_error", "message": "not a JSON object",
                "code": None}}))
            return
        if req.get("type") != "response.create":
            log(event="ws_message", n=n, type=req.get("type"))
            return
        m = next_n()
        warmup = req.get("generate") is False
        model = req.get("model") or "fake-model"
        log(event="request", n=m, upgrade=n, method="WS", stream=True, model=req.get("model"),
            warmup=warmup, previous_response_id=req.get("previous_response_id"), status=200,
            **auth)
        rid = "resp_fake%02d" % m
        if warmup:
            for _, data in warmup_events(model, rid):
                ws.send_text(json.dumps(data))
            return
        events = responses_events(model, rid)
        for i, (kind, data) in enumerate(events):
            if i:
                time.sleep(args.last_delay if i == len(events) - 1 else args.delay)
            ws.send_text(json.dumps(data))
            log(event="sent", n=m, i=i, kind=kind, t=round(time.time(), 3))
        log(event="done", n=m, events=len(events))

    def do_GET(self):
        self.handle_api("GET")

    def do_POST(self):
        self.handle_api("POST")

    def do_HEAD(self):
        self.handle_api("HEAD")


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--certs", required=True)
    ap.add_argument("--anthropic-key", required=True, action="append")
    ap.add_argument("--openai-key", required=True, action="append")
    ap.add_argument("--delay", type=float, default=0.25)
    ap.add_argument("--last-delay", type=float)
    ap.add_argument("--text", default="Hello from the fake API.")
    ap.add_argument("--chatgpt-account")
    ap.add_argument("--google-key", action="append")
    ap.add_argument("sites", nargs="+")
    args = ap.parse_args()
    if args.last_delay is None:
        args.last_delay = args.delay
    servers = []
    for s in args.sites:
        name, _, where = s.partition("=")
        addr, _, port = where.rpartition(":")
        srv = tlsserver.Server((addr, int(port)), Handler, "%s/%s.pem" % (args.certs, name),
                               "%s/%s.key" % (args.certs, name), alpn=["http/1.1"])
        srv.site = name
        servers.append(srv)
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
