// Summarises the CPU profiles bench/cpu-profile.cjs wrote during the writes benchmark, per
// service, within one row's window (rows.json, written beside them): the functions with the most
// self time, and the project's own functions with the most inclusive time (what each costs with
// everything it calls). Run alone: `node bench/profile-summary.mjs <dir> <row substring> [top]`.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Self and inclusive milliseconds per function (name + file:line) over the samples in [fromUs, toUs]. */
export function profileWindow(profile, fromUs, toUs) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (n) => {
    const f = n.callFrame;
    const file = f.url ? f.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, '~/').replace(/.*\/(services|packages)\//, '$1/') : '';
    return `${f.functionName || '(anonymous)'} ${file}${file ? `:${f.lineNumber + 1}` : ''}`;
  };
  const self = new Map();
  const inclusive = new Map();
  let t = profile.startTime;
  let totalUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    if (t < fromUs || t > toUs) continue;
    const next = profile.timeDeltas[i + 1] ?? dt;
    let node = byId.get(profile.samples[i]);
    if (!node || node.callFrame.functionName === '(idle)') continue;
    totalUs += next;
    self.set(label(node), (self.get(label(node)) ?? 0) + next);
    const seen = new Set();
    for (let id = node.id; id !== undefined; id = parent.get(id)) {
      const l = label(byId.get(id));
      if (seen.has(l)) continue;
      seen.add(l);
      inclusive.set(l, (inclusive.get(l) ?? 0) + next);
    }
  }
  const ms = (m) => [...m].map(([k, us]) => [k, us / 1000]).sort((a, b) => b[1] - a[1]);
  return { totalMs: totalUs / 1000, self: ms(self), inclusive: ms(inclusive) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dir, rowName, topArg] = process.argv.slice(2);
  const top = Number(topArg ?? 25);
  const rows = JSON.parse(fs.readFileSync(path.join(dir, 'rows.json'), 'utf8'));
  const row = rows.find((r) => r.name.includes(rowName ?? ''));
  if (!row) throw new Error(`no row matching "${rowName}" in ${dir}/rows.json`);
  console.log(`row: ${row.name} (${((row.to - row.from) / 1000).toFixed(1)} s)`);
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.cpuprofile')).sort()) {
    const profile = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
    if (!profile.anchor) continue;
    const toMono = (wallMs) => profile.anchor.monoUs + (wallMs - profile.anchor.wallMs) * 1000;
    const w = profileWindow(profile, toMono(row.from), toMono(row.to));
    console.log(`\n== ${f}: ${w.totalMs.toFixed(0)} ms on CPU in the window`);
    console.log('  self:');
    for (const [k, v] of w.self.slice(0, top)) console.log(`    ${v.toFixed(0).padStart(6)} ms  ${k}`);
    console.log('  inclusive (the project\'s own code):');
    for (const [k, v] of w.inclusive.filter(([k]) => /(services|packages)\//.test(k) && !k.includes('~/')).slice(0, top)) console.log(`    ${v.toFixed(0).padStart(6)} ms  ${k}`);
  }
}
