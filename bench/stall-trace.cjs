// Preload (node -r) that records when a service's event loop stalls, and why: a 5 ms timer
// notes every tick that came more than STALL_MS late, with the process's CPU time during that
// window and the garbage collections that overlapped it. CPU time near the window's length means
// the process was busy (JavaScript, or GC when one overlaps); near zero means it was runnable but
// not scheduled (another process had the cores). Written at exit to
// `<BENCH_STALL_TRACE>/<service>-<pid>.json`; `summariseStalls` in stall-summary.mjs reads them.
// Times are epoch milliseconds. Set by the writes benchmark when BENCH_STALL_TRACE names a directory.
const fs = require('node:fs');
const path = require('node:path');
const { performance, PerformanceObserver } = require('node:perf_hooks');

const dir = process.env.BENCH_STALL_TRACE;
const STALL_MS = Number(process.env.BENCH_STALL_MS ?? 20);
const TICK_MS = 5;
const GC_KINDS = { 1: 'minor', 4: 'major', 8: 'incremental', 16: 'weakcb' };

if (dir && process.argv[2] !== 'migrate') {
  const stalls = [];
  const gcs = [];
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  const timer = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage(lastCpu);
    const late = now - last - TICK_MS;
    if (late > STALL_MS) stalls.push({ at: Math.round(performance.timeOrigin + last), lateMs: +late.toFixed(1), cpuMs: +((cpu.user + cpu.system) / 1000).toFixed(1), windowMs: +(now - last).toFixed(1) });
    last = now;
    lastCpu = process.cpuUsage();
  }, TICK_MS);
  timer.unref();
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push({ at: Math.round(performance.timeOrigin + e.startTime), ms: +e.duration.toFixed(1), kind: GC_KINDS[e.detail?.kind] ?? 'other' });
  });
  observer.observe({ entryTypes: ['gc'] });
  let written = false;
  process.on('exit', () => {
    if (written) return;
    written = true;
    const service = path.basename(path.resolve(process.argv[1] ?? '.', '../..'));
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `${service}-${process.pid}.json`), JSON.stringify({ service, pid: process.pid, stallMs: STALL_MS, stalls, gcs }));
  });
}
