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
// Environment: CONSOLE_URL, CONSOLE_USER, CONSOLE_PASSWORD, CONSOLE_REALM,
// PAGE_SECONDS (30), NODE_PATH (where playwright-core is).
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
} finally {
  await browser.close();
}
