// Preload (node -r) that CPU-profiles a service process from start to exit and writes
// `<BENCH_CPU_PROFILE>/<pid>.cpuprofile` (open it in Chrome DevTools or speedscope). Set by
// benchmarks when BENCH_CPU_PROFILE names a directory; `--cpu-prof` itself is not allowed in
// NODE_OPTIONS. Migration runs (argv `migrate`) are not profiled.
const inspector = require('node:inspector');
const fs = require('node:fs');
const path = require('node:path');

const dir = process.env.BENCH_CPU_PROFILE;
if (dir && process.argv[2] !== 'migrate') {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 500 });
  session.post('Profiler.start');
  // The profile's timestamps are monotonic microseconds (the clock of process.hrtime); this pair
  // lets bench/profile-summary.mjs cut a benchmark row's wall-clock window out of it.
  const anchor = { wallMs: Date.now(), monoUs: Number(process.hrtime.bigint() / 1000n) };
  let written = false;
  // The in-process session answers synchronously, so this works in an 'exit' handler.
  process.on('exit', () => {
    if (written) return;
    written = true;
    session.post('Profiler.stop', (err, res) => {
      if (err) return;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${path.basename(path.resolve(process.argv[1] ?? '.', '../..'))}-${process.pid}.cpuprofile`), JSON.stringify({ ...res.profile, anchor }));
    });
  });
}
