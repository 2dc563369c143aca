// Shared load-generation helpers for the benchmarks: autocannon runs and child processes that
// announce their port on stdout as `PORT <n>`.
import { spawn } from 'node:child_process';
import autocannon from 'autocannon';

/** Runs autocannon and returns requests/s and latency percentiles (ms). */
export async function measure({ url, connections = 64, duration = 10, method = 'GET', headers = {}, setupClient, requests, warmup = 2 }) {
  if (warmup > 0) await autocannon({ url, connections, duration: warmup, method, headers, requests, setupClient });
  const r = await autocannon({ url, connections, duration, method, headers, requests, setupClient });
  const ok = r['2xx'];
  return {
    rps: ok / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
}

/** Spawns `node script` and resolves with its announced port and a stop function. */
export function spawnWithPort(script, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/PORT (\d+)/);
      if (m) resolve({ port: Number(m[1]), stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) });
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}
