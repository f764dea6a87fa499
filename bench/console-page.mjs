// console-page.mjs - the browser's part of bench/console.sh: Debian's
// Chromium, driven by playwright-core, signs in to the console as an admin,
// opens the live denials (/#denials) and, while the bench floods egressd
// with denials, counts the page's frames with requestAnimationFrame (the
// frame rate the browser really drew at, and the longest gap between two
// frames) beside window.consoleStats (console.js: denials drawn, draw
// calls, time spent drawing, the longest draw).
//
// Prints "ready" once the stream is live and the counters run, then after
// PAGE_SECONDS one JSON line and a few lines for people.
// With PAGE_TRACE=1 the browser also records a timeline trace of the run
// (Chromium's devtools.timeline category) and the driver prints where the
// page's main thread spent its time: the tasks over 50 ms and, inside
// them, script, style, layout, paint and the rest.
// Environment: CONSOLE_URL, CONSOLE_USER, CONSOLE_PASSWORD, CONSOLE_REALM,
// PAGE_SECONDS (30), PAGE_TRACE (0), PAGE_SANDBOXES (0: the sandboxes
// page is not timed), NODE_PATH (where playwright-core is).
import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require(path.join(process.env.NODE_PATH, "playwright-core"));
const URL_ = process.env.CONSOLE_URL;
const SECONDS = Number(process.env.PAGE_SECONDS || 30);

// utime+stime (ticks) of this process's children and theirs (the browser),
// not this process's own.
function treeTicks(root = process.pid) {
  const kids = new Map();
  const stat = new Map();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const s = readFileSync(`/proc/${p}/stat`, "utf8");
      const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
      stat.set(Number(p), Number(f[11]) + Number(f[12]));
      const pp = Number(f[1]);
      if (!kids.has(pp)) kids.set(pp, []);
      kids.get(pp).push(Number(p));
    } catch { /* gone */ }
  }
  let sum = -(stat.get(root) || 0);
  const q = [root];
  while (q.length) {
    const p = q.pop();
    sum += stat.get(p) || 0;
    for (const k of kids.get(p) || []) q.push(k);
  }
  return sum;
}

// The main thread's time in a timeline trace (trace events, Chromium's
// JSON): its top-level tasks (RunTask) and, within those over 50 ms, the
// time of the kinds of work nested directly in them.  Returns lines for
// people.
function traceSummary(events) {
  const main = new Set();
  for (const e of events)
    if (e.ph === "M" && e.name === "thread_name" && e.args && e.args.name === "CrRendererMain") main.add(e.pid + ":" + e.tid);
  const mine = events.filter((e) => e.ph === "X" && main.has(e.pid + ":" + e.tid) && typeof e.dur === "number");
  const tasks = mine.filter((e) => e.name === "RunTask" || e.name === "ThreadControllerImpl::RunTask");
  const long = tasks.filter((t) => t.dur > 50000);
  const kinds = {
    script: ["FunctionCall", "EvaluateScript", "TimerFire", "FireAnimationFrame", "EventDispatch", "V8.Execute", "v8.callFunction"],
    style: ["UpdateLayoutTree", "RecalculateStyles", "ParseAuthorStyleSheet"],
    layout: ["Layout"],
    paint: ["Paint", "PrePaint", "Layerize", "UpdateLayer", "PaintImage", "Commit"],
    gc: ["MinorGC", "MajorGC", "V8.GC_SCAVENGER", "BlinkGC.AtomicPhase"],
  };
  const kindOf = new Map();
  for (const [k, names] of Object.entries(kinds)) for (const n of names) kindOf.set(n, k);
  const inLong = {};
  const byName = {};
  // For each long task, the events inside it of a known kind that no other
  // known-kind event inside it encloses (so nothing is counted twice).
  for (const t of long) {
    const inner = mine.filter((e) => e !== t && e.ts >= t.ts && e.ts + e.dur <= t.ts + t.dur && kindOf.has(e.name));
    inner.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    let end = -1;
    for (const e of inner) {
      if (e.ts < end) continue;
      end = e.ts + e.dur;
      const k = kindOf.get(e.name);
      inLong[k] = (inLong[k] || 0) + e.dur / 1000;
      byName[e.name] = (byName[e.name] || 0) + e.dur / 1000;
    }
  }
  const total = long.reduce((a, t) => a + t.dur / 1000, 0);
  const known = Object.values(inLong).reduce((a, b) => a + b, 0);
  const fmt = (o) => Object.entries(o).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(", ");
  return [
    `trace: ${tasks.length} main-thread tasks, ${long.length} over 50 ms (${total.toFixed(0)} ms, ` +
      `longest ${(Math.max(0, ...long.map((t) => t.dur)) / 1000).toFixed(1)} ms)`,
    `trace: inside those: ${fmt(inLong)}, other ${(total - known).toFixed(0)} ms`,
    `trace: by event: ${fmt(byName)}`,
  ];
}

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  await page.goto(URL_ + "/");
  await page.fill("#username", process.env.CONSOLE_USER);
  await page.selectOption("#realm", process.env.CONSOLE_REALM);
  await page.fill("#password", process.env.CONSOLE_PASSWORD);
  await page.click("#login-submit");
  await page.waitForSelector("#who:not([hidden])", { timeout: 15000 });
  await page.goto(URL_ + "/#denials");
  await page.waitForSelector("#stream-state:text('Live.')", { timeout: 15000 });
  // The browser's own frames: every requestAnimationFrame callback's
  // timestamp, the gaps between them; and how long the main thread was
  // blocked (long tasks, where the browser reports them).
  await page.evaluate(() => {
    const f = { frames: 0, first: 0, last: 0, maxGap: 0, gaps: [], longTasks: 0, longTaskMs: 0 };
    window.__frames = f;
    const tick = (t) => {
      if (f.first === 0) f.first = t;
      else {
        const g = t - f.last;
        f.gaps.push(g);
        if (g > f.maxGap) f.maxGap = g;
      }
      f.last = t;
      f.frames++;
      if (!f.stop) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    try {
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) { f.longTasks++; f.longTaskMs += e.duration; }
      }).observe({ type: "longtask", buffered: false });
    } catch { /* not supported */ }
    window.consoleStats.drawn = 0;
    window.consoleStats.frames = 0;
    window.consoleStats.drawMs = 0;
    window.consoleStats.maxFrameMs = 0;
  });
  const trace = process.env.PAGE_TRACE === "1";
  if (trace) await browser.startTracing(page, { categories: ["toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline", "v8"] });
  const cpu0 = treeTicks();
  const t0 = Date.now();
  console.log("ready");
  // A look each second: is the page still answering, and how fast.
  const probes = [];
  while (Date.now() - t0 < SECONDS * 1000) {
    await page.waitForTimeout(1000);
    const p0 = Date.now();
    const rows = await page.evaluate(() => document.querySelectorAll("#denials-table tbody tr").length);
    probes.push({ ms: Date.now() - p0, rows });
  }
  const wall = (Date.now() - t0) / 1000;
  const cpu1 = treeTicks();
  const r = await page.evaluate(() => {
    const f = window.__frames;
    f.stop = true;
    const g = f.gaps.slice().sort((a, b) => a - b);
    const pct = (p) => (g.length ? g[Math.min(g.length - 1, Math.floor(g.length * p))] : 0);
    // console.js's own list of the recent denials (what Allow… counts and
    // the access page shows) against the newest denial it was given.
    let newestKept = null;
    try { newestKept = Math.max(...state.denials.map((d) => d.cseq)); } catch { /* not visible */ }
    return {
      consoleStats: { ...window.consoleStats },
      rafFrames: f.frames,
      rafSeconds: (f.last - f.first) / 1000,
      rafFps: (f.frames - 1) / ((f.last - f.first) / 1000),
      gapP50: pct(0.5), gapP99: pct(0.99), maxGap: f.maxGap,
      over50ms: g.filter((x) => x > 50).length,
      longTasks: f.longTasks, longTaskMs: f.longTaskMs,
      rows: document.querySelectorAll("#denials-table tbody tr").length,
      notice: document.getElementById("notice").textContent,
      streamState: document.getElementById("stream-state").textContent,
      pageSeq: typeof state === "object" ? state.seq : null,
      keptNewest: newestKept,
      keptLength: typeof state === "object" ? state.denials.length : null,
    };
  });
  r.wallSeconds = wall;
  r.browserCpu = (cpu1 - cpu0) / 100 / wall; // CLK_TCK is 100 on Linux
  r.probeMsMax = Math.max(...probes.map((p) => p.ms));
  r.probeMsMedian = probes.map((p) => p.ms).sort((a, b) => a - b)[Math.floor(probes.length / 2)];
  console.log(JSON.stringify(r));
  const s = r.consoleStats;
  console.log(`denials drawn ${s.drawn} in ${s.frames} draws (${(s.drawn / wall).toFixed(0)}/s), ` +
    `drawing ${s.drawMs.toFixed(0)} ms in all (${(s.drawMs / s.frames).toFixed(2)} ms a draw, ` +
    `${(100 * s.drawMs / 1000 / wall).toFixed(1)}% of the time), the longest draw ${s.maxFrameMs.toFixed(1)} ms`);
  console.log(`browser frames ${r.rafFrames} in ${r.rafSeconds.toFixed(1)} s = ${r.rafFps.toFixed(1)} fps; ` +
    `gap between frames p50 ${r.gapP50.toFixed(1)} ms, p99 ${r.gapP99.toFixed(1)} ms, longest ${r.maxGap.toFixed(1)} ms, ` +
    `${r.over50ms} gaps over 50 ms; long tasks ${r.longTasks} (${r.longTaskMs.toFixed(0)} ms)`);
  console.log(`page answered page.evaluate in ${r.probeMsMedian} ms (median), ${r.probeMsMax} ms (slowest), ` +
    `${r.rows} rows on the page; browser CPU ${(100 * r.browserCpu).toFixed(0)}% of a core; ` +
    `notice "${r.notice}", stream "${r.streamState}"`);
  console.log(`console.js's recent denials (state.denials): ${r.keptLength} kept, newest cseq ${r.keptNewest}; ` +
    `newest cseq the page was given ${r.pageSeq}`);
  // The sandboxes page with PAGE_SANDBOXES sandboxes, the flood still on:
  // from the switch to #sandboxes to every row drawn with what each
  // egressd holds for it; and GET /api/sandboxes alone.  Three times each.
  const want = Number(process.env.PAGE_SANDBOXES || 0);
  if (want) {
    const page_ms = [], api_ms = [];
    let rowsSeen = 0, boundSeen = 0;
    for (let i = 0; i < 3; i++) {
      const [ms, n, bound] = await page.evaluate(async (want) => {
        document.querySelector("#sandboxes-table tbody").replaceChildren();
        const t0 = performance.now();
        location.hash = "#sandboxes";
        await new Promise((done) => {
          const look = () => {
            const rows = document.querySelectorAll("#sandboxes-table tbody tr");
            if ((rows.length >= want && rows[want - 1].querySelector("td.egressd div")) || performance.now() - t0 > 60000) done();
            else setTimeout(look, 5);
          };
          look();
        });
        const took = performance.now() - t0;
        const n = document.querySelectorAll("#sandboxes-table tbody tr").length;
        const inStep = [...document.querySelectorAll("#sandboxes-table td.egressd")]
          .filter((td) => /: bound$/.test(td.textContent)).length;
        location.hash = "#denials";
        return [took, n, inStep];
      }, want);
      page_ms.push(ms);
      rowsSeen = n;
      boundSeen = bound;
      api_ms.push(await page.evaluate(async () => {
        const t0 = performance.now();
        await (await fetch("/api/sandboxes")).json();
        return performance.now() - t0;
      }));
    }
    // "Would it pass?" for one of them: the console finds the sandbox by
    // name (its owner scope too), then asks every egressd.
    const explain_ms = [];
    for (let i = 0; i < 3; i++)
      explain_ms.push(await page.evaluate(async () => {
        const t0 = performance.now();
        const r = await fetch("/api/explain?name=sandbox-001&host=denied.test&port=80");
        await r.json();
        return r.ok ? performance.now() - t0 : -r.status;
      }));
    console.log(`would it pass (GET /api/explain, one of ${want} sandboxes): ` +
      `${explain_ms.map((x) => x.toFixed(0)).join(", ")} ms (during the flood)`);
    console.log(`sandboxes page: ${rowsSeen} of ${want} rows (${boundSeen} bound in step in egressd) drawn in ` +
      `${page_ms.map((x) => x.toFixed(0)).join(", ")} ms; GET /api/sandboxes alone ` +
      `${api_ms.map((x) => x.toFixed(0)).join(", ")} ms (during the flood)`);
  }
  if (trace) {
    const buf = await browser.stopTracing();
    if (process.env.PAGE_TRACE_FILE) (await import("node:fs")).writeFileSync(process.env.PAGE_TRACE_FILE, buf);
    const j = JSON.parse(buf.toString("utf8"));
    for (const l of traceSummary(Array.isArray(j) ? j : j.traceEvents)) console.log(l);
  }
} finally {
  await browser.close();
}
