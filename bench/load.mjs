// Shared load-generation helpers for the benchmarks: autocannon runs and child processes that
// announce their port on stdout as `PORT <n>`.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';

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

/** Spawns `node script` and resolves with its announced port, its pid and a stop function. */
export function spawnWithPort(script, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/PORT (\d+)/);
      if (m) resolve({ port: Number(m[1]), pid: child.pid, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) });
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

/** One JSON request through the gateway (anonymous without `token`); throws unless the status is one of `expected`. */
export async function call(baseUrl, method, urlPath, token, body, expected) {
  const res = await fetch(`${baseUrl}${urlPath}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json', ...(method === 'GET' ? {} : { 'idempotency-key': randomUUID() }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => undefined);
  if (!expected.includes(res.status)) throw new Error(`${method} ${urlPath}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Runs `count` tasks with at most `width` at a time; answers their results in order. */
export async function inParallel(count, width, task) {
  const out = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await task(i);
      }
    }),
  );
  return out;
}

/**
 * Sends exactly `requests.length` requests over `connections` connections, request i being
 * `{ method?, path?, body, headers? }` (method defaults to POST, path to the url's; its headers
 * override `headers`, e.g. a credential of its own), each with its own Idempotency-Key.
 * Latencies in ms; `statuses` counts answers by status. `onFirst` runs as the first request is
 * sent and `onLast` as the last answer arrives: the window `rps` is measured over (autocannon
 * itself returns only on its next whole-second tick, up to a second later).
 */
export async function loadRequests({ url, connections, headers, requests, onFirst, onLast }) {
  let next = 0;
  let answered = 0;
  const statuses = {};
  let first;
  let last;
  const r = await autocannon({
    url,
    connections,
    amount: requests.length,
    timeout: 30,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => {
          if (first === undefined) {
            onFirst?.();
            first = performance.now();
          }
          const q = requests[next++ % requests.length];
          return {
            ...req,
            method: q.method ?? 'POST',
            ...(q.path ? { path: q.path } : {}),
            headers: { ...headers, ...q.headers, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
            body: JSON.stringify(q.body ?? {}),
          };
        },
        onResponse: (status) => {
          last = performance.now();
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (++answered === requests.length) onLast?.();
        },
      },
    ],
  });
  // From the first request to the last answer: autocannon's own duration is whole seconds (a run
  // given an amount also ends on a whole-second tick), too coarse for a run of a few seconds.
  const seconds = ((last ?? performance.now()) - (first ?? 0)) / 1000;
  return {
    rps: r['2xx'] / seconds,
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    statuses,
  };
}

/** Resident set size of a process in MB (Linux /proc), or undefined when unavailable. */
export function rssMb(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The machine's busy and total CPU time so far (ms, every core), from /proc/stat. */
export function machineCpuMs() {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = f.reduce((a, b) => a + b, 0) * 10;
    const idle = (f[3] + (f[4] ?? 0)) * 10;
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

/**
 * CPU time (ms) of every PostgreSQL process on this machine, with what exited backends left in
 * their parent's waited-for children's time; undefined where none can be read (a remote server).
 */
export function postgresCpuMs() {
  let total = 0;
  let seen = false;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const open = stat.indexOf('(');
      const close = stat.lastIndexOf(')');
      if (!stat.slice(open + 1, close).startsWith('postgres')) continue;
      const rest = stat.slice(close + 2).split(' ');
      total += (Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14])) * 10;
      seen = true;
    } catch {
      // gone between the listing and the read
    }
  }
  return seen ? total : undefined;
}

/** Every sample of a Prometheus text exposition: `name{labels}` → value. */
function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/**
 * What each service's process did (event-loop delay, GC pauses) between two calls: call it
 * before a measurement (it also starts the services' delay windows) and call the answer after.
 * Answers per service `{ loopMaxMs, loopP99Ms, majorGcs, gcOver40ms, gcMaxBucketMs, rssMb }`.
 */
export async function watchProcesses(platform) {
  const scrape = async () => {
    const entries = await Promise.all(
      Object.entries(platform.processes)
        .filter(([, p]) => p.metricsUrl)
        .map(async ([n, p]) => [n, parseMetrics(await (await fetch(`${p.metricsUrl}/metrics`)).text())]),
    );
    return new Map(entries);
  };
  const gcCount = (m, kind, le) => [...m].filter(([k]) => k.startsWith('nodejs_gc_duration_seconds_bucket') && k.includes(`kind="${kind}"`) && k.includes(`le="${le}"`)).reduce((n, [, v]) => n + v, 0);
  const before = await scrape();
  return async () => {
    const after = await scrape();
    const out = {};
    for (const [n, m] of after) {
      const b = before.get(n) ?? new Map();
      const pick = (k) => [...m].find(([key]) => key.startsWith(k))?.[1];
      const delta = (kind, le) => gcCount(m, kind, le) - gcCount(b, kind, le);
      const kinds = ['minor', 'major', 'incremental', 'weakcb', 'other'];
      out[n] = {
        loopMaxMs: (pick('nodejs_eventloop_delay_max_seconds') ?? NaN) * 1000,
        loopP99Ms: (pick('nodejs_eventloop_delay_p99_seconds') ?? NaN) * 1000,
        majorGcs: delta('major', '+Inf'),
        gcOver40ms: kinds.reduce((x, k) => x + delta(k, '+Inf') - delta(k, '0.04'), 0),
        rssMb: (pick('process_resident_memory_bytes') ?? NaN) / 2 ** 20,
      };
    }
    return out;
  };
}

/** CPU time (user + system) a process has used, in ms (Linux /proc), or undefined when unavailable. */
export function cpuMs(pid) {
  try {
    // Fields after the parenthesised command name: state is 1st, utime 12th, stime 13th (clock ticks of 10 ms).
    const rest = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(rest[11]) + Number(rest[12])) * 10;
  } catch {
    return undefined;
  }
}

const autovacuumOn = new Map();

/**
 * Does what the server's autovacuum would have done by now, where the server runs without it
 * (`autovacuum = off`, as on this project's CI machines): `VACUUM (ANALYZE)` of the bench's
 * database. A deployment's server vacuums and analyzes a table whenever a tenth of it has changed
 * (autovacuum's defaults); without that, the planner keeps costing the bench's tables as the
 * empty ones it created, and updated rows leave their dead versions in every index, so the bench
 * would measure a server no deployment runs (the idempotency outcome update had turned into a
 * sequential scan of every record by the sixth row). Answers the milliseconds it took, or
 * undefined where the server's autovacuum is on (it then does nothing).
 */
export async function standInForAutovacuum(databaseUrl) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    if (!autovacuumOn.has(databaseUrl)) autovacuumOn.set(databaseUrl, (await client.query('show autovacuum')).rows[0].autovacuum === 'on');
    if (autovacuumOn.get(databaseUrl)) return undefined;
    const started = performance.now();
    await client.query('vacuum (analyze)');
    return performance.now() - started;
  } finally {
    await client.end();
  }
}
