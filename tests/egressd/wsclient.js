// wsclient.js - a WebSocket client for websocket.t: undici's WebSocket
// (the one node's global WebSocket is built from) through HTTPS_PROXY
// with undici's EnvHttpProxyAgent, the CA from NODE_EXTRA_CA_CERTS, and
// the upgrade request's extra fields from WS_HEADERS (a JSON object);
// every message it gets is appended to the file WS_DUMP, when set.
//
//   node wsclient.js UNDICI_DIR URL SCRIPT
//
// SCRIPT is a JSON array of steps, run in order:
//   {"send": TEXT}                 a text message
//   {"send_bin": N}                a binary message of N bytes (i * 31 % 251)
//   {"send_text_len": N}           a text message of N bytes ("y" * N)
//   {"expect": TEXT}               the next message is this text
//   {"expect_len": N, "kind": "text"|"binary", "sha16": HEX?}
//                                  the next message has N bytes (and hash)
//   {"every": SECONDS, "for": SECONDS}
//                                  send "tick N" every SECONDS for SECONDS,
//                                  expecting each echoed; stops at a close
//   {"close": CODE, "reason": TEXT}
//                                  start the close handshake
//   {"expect_close": true}         wait for the close
// Prints one JSON object: {"open": bool, "status": the error if it never
// opened, "steps": how many steps passed, "failed": what failed or null,
// "messages": [{kind, len, sha16, t}], "close": {code, reason, clean, t},
// "t_open"} and exits 0 (the test judges it).
"use strict";
const crypto = require("crypto");
const undici = require(process.argv[2]);
const url = process.argv[3];
const steps = JSON.parse(process.argv[4]);

const out = { open: false, status: null, steps: 0, failed: null, messages: [], close: null };
const queue = [];
let waiter = null;
const sha16 = (b) => crypto.createHash("sha256").update(b).digest("hex").slice(0, 16);
const now = () => Date.now() / 1000;

function deliver(item) {
    if (waiter) {
        const w = waiter;
        waiter = null;
        w(item);
    } else {
        queue.push(item);
    }
}
// The next message or close, or a timeout after `secs`.
function next(secs) {
    if (queue.length) return Promise.resolve(queue.shift());
    return new Promise((resolve) => {
        const t = setTimeout(() => { waiter = null; resolve({ kind: "timeout" }); }, secs * 1000);
        waiter = (item) => { clearTimeout(t); resolve(item); };
    });
}

async function run() {
    const dispatcher = new undici.EnvHttpProxyAgent();
    const headers = JSON.parse(process.env.WS_HEADERS || "{}");
    const ws = new undici.WebSocket(url, { dispatcher, headers });
    ws.binaryType = "arraybuffer";
    ws.addEventListener("message", (ev) => {
        const buf = typeof ev.data === "string" ? Buffer.from(ev.data) : Buffer.from(ev.data);
        const m = { kind: typeof ev.data === "string" ? "text" : "binary", len: buf.length,
            sha16: sha16(buf), t: now() };
        if (m.kind === "text" && buf.length <= 256) m.text = ev.data;
        out.messages.push(m);
        if (process.env.WS_DUMP) require("fs").appendFileSync(process.env.WS_DUMP, buf);
        deliver(m);
    });
    ws.addEventListener("close", (ev) => {
        out.close = { code: ev.code, reason: ev.reason, clean: ev.wasClean, t: now() };
        deliver({ kind: "close" });
    });
    const opened = await new Promise((resolve) => {
        ws.addEventListener("open", () => resolve(true));
        ws.addEventListener("error", (ev) => {
            out.status = String(ev.message || (ev.error && ev.error.message) || "error");
            resolve(false);
        });
    });
    out.open = opened;
    out.t_open = now();
    if (!opened) return;
    for (const s of steps) {
        const fail = (why) => { out.failed = { step: out.steps, why }; };
        if ("send" in s) ws.send(s.send);
        else if ("send_bin" in s) ws.send(Uint8Array.from({ length: s.send_bin }, (_, i) => i * 31 % 251));
        else if ("send_text_len" in s) ws.send("y".repeat(s.send_text_len));
        else if ("expect" in s) {
            const m = await next(s.within || 10);
            if (m.kind !== "text" || m.text !== s.expect) { fail("wanted " + JSON.stringify(s.expect) + ", got " + JSON.stringify(m)); break; }
        } else if ("expect_len" in s) {
            const m = await next(s.within || 20);
            if (m.kind !== s.kind || m.len !== s.expect_len || (s.sha16 && m.sha16 !== s.sha16)) { fail("wanted " + JSON.stringify(s) + ", got " + JSON.stringify(m)); break; }
        } else if ("every" in s) {
            const end = now() + s.for;
            let i = 0, ok = true;
            while (now() < end) {
                const text = "tick " + i++;
                ws.send(text);
                const m = await next(10);
                if (m.kind !== "text" || m.text !== text) { fail("tick " + (i - 1) + ": got " + JSON.stringify(m)); ok = false; break; }
                await new Promise((r) => setTimeout(r, s.every * 1000));
            }
            if (!ok) break;
        } else if ("close" in s) ws.close(s.close, s.reason || "");
        else if ("expect_close" in s) {
            const m = out.close ? { kind: "close" } : await next(s.within || 10);
            if (m.kind !== "close") { fail("no close: " + JSON.stringify(m)); break; }
        }
        out.steps++;
    }
    if (out.close === null) {
        try { ws.close(1000, "done"); } catch (e) { /* already closing */ }
        await next(3);
    }
}

run().catch((e) => { out.failed = { step: out.steps, why: String(e && e.stack || e) }; })
    .finally(() => { console.log(JSON.stringify(out)); process.exit(0); });
