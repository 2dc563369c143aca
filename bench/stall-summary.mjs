// Summarises the traces bench/stall-trace.cjs wrote: per service, how many event-loop stalls
// there were and what each coincided with. A stall is "gc" when a collection overlapped it and
// the GC time covers most of it, "busy" when the process used CPU for most of the window without
// such a GC (a long synchronous task), "descheduled" when it used little CPU (the process was
// waiting for a core). Run alone: `node bench/stall-summary.mjs <dir>`.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function classify(stall, gcs) {
  const from = stall.at;
  const to = stall.at + stall.windowMs;
  const overlapping = gcs.filter((g) => g.at < to && g.at + g.ms > from);
  const gcMs = overlapping.reduce((n, g) => n + g.ms, 0);
  if (gcMs >= stall.lateMs / 2) return { kind: 'gc', gcKinds: [...new Set(overlapping.map((g) => g.kind))] };
  if (stall.cpuMs >= stall.windowMs / 2) return { kind: 'busy' };
  return { kind: 'descheduled' };
}

/**
 * One summary per service trace in `dir`, or, when `dir` holds the benchmark's `rows.json`
 * (`[{ name, from, to }]`, epoch ms), one per service and row, of what happened during it.
 */
export function summariseStalls(dir) {
  const out = [];
  const rowsFile = path.join(dir, 'rows.json');
  const windows = fs.existsSync(rowsFile) ? JSON.parse(fs.readFileSync(rowsFile, 'utf8')) : [{ name: 'whole run', from: 0, to: Infinity }];
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.json') && x !== 'rows.json').sort()) {
    const whole = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
    for (const w of windows) {
      const within = (x) => x.at >= w.from && x.at <= w.to;
      out.push(summarise({ ...whole, stalls: whole.stalls.filter(within), gcs: whole.gcs.filter(within) }, w.name));
    }
  }
  return out;
}

function summarise(t, row) {
  const counts = { gc: 0, busy: 0, descheduled: 0 };
  const over40ms = { gc: 0, busy: 0, descheduled: 0 };
  const gcKinds = {};
  for (const s of t.stalls) {
    const c = classify(s, t.gcs);
    counts[c.kind]++;
    if (s.lateMs >= 40) over40ms[c.kind]++;
    for (const k of c.gcKinds ?? []) gcKinds[k] = (gcKinds[k] ?? 0) + 1;
  }
  return {
    row,
    service: t.service,
    stalls: t.stalls.length,
    ...counts,
    over40ms,
    gcKinds,
    gcs: t.gcs.length,
    gcTotalMs: Math.round(t.gcs.reduce((n, g) => n + g.ms, 0)),
    gcsOver20ms: t.gcs.filter((g) => g.ms >= 20).map((g) => `${g.kind} ${g.ms}`).slice(0, 12),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const s of summariseStalls(process.argv[2])) console.log(JSON.stringify(s));
}
