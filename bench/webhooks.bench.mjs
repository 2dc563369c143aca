// Webhooks: events committed to a service's outbox (billing's, as its own transactions write
// them) → the service's outbox relay → JetStream → the webhooks service → a signed POST that a
// receiver in its own process verifies with the `standardwebhooks` library. Measured beside raw
// signed POSTs from Node to the same receiver in the same run.
//   - latency: commit → verified arrival at a steady 500 events/s (one event per commit)
//   - throughput: a burst of events committed at once, events/s until the last verified arrival
import { fork } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const here = path.dirname(fileURLToPath(import.meta.url));

export const name = 'webhooks';
export const services = ['identity', 'billing', 'webhooks', 'gateway'];

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The receiver process, with a request/response helper over IPC. */
function startReceiver() {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(here, 'baseline/webhook-receiver.mjs'), [], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/PORT (\d+)/);
      if (!m) return;
      const call = (msg) => new Promise((r) => (child.once('message', r), child.send(msg)));
      resolve({ url: `http://127.0.0.1:${m[1]}/hook`, port: Number(m[1]), call, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) });
    });
    child.once('exit', (code) => reject(new Error(`webhook receiver exited with ${code}`)));
  });
}

async function json(res) {
  const body = await res.json();
  if (!res.ok) throw new Error(`${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** Waits until the receiver has seen every id (or `timeoutMs` passed); returns id → arrival time. */
async function arrivalsOf(receiver, ids, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const report = await receiver.call({ report: true });
    const arrivals = new Map(report.arrivals);
    const missing = ids.filter((id) => !arrivals.has(id)).length;
    if (missing === 0 || Date.now() > end) return { arrivals, missing, duplicates: report.duplicates, invalid: report.invalid };
    await sleep(200);
  }
}

export async function run({ platform, databaseUrl, duration = Number(process.env.BENCH_DURATION ?? 10) }) {
  const receiver = await startReceiver();
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 32 });
  try {
    const gw = platform.gatewayUrl;
    const admin = { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' };
    const merchant = await json(await fetch(`${gw}/api/admin/merchants`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'Bench Webhooks', contactEmail: 'hooks@example.com' }) }));
    const key = await json(await fetch(`${gw}/api/admin/merchants/${merchant.id}/api-keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'bench' }) }));
    await receiver.call({ secret: key.signingSecret });
    await json(
      await fetch(`${gw}/api/ApiKeys/${key.id}/webhook`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id: key.id, merchantId: merchant.id, webhookUrl: receiver.url, webhookEvents: null, webhookEnabled: true }),
      }),
    );

    /** Commits `n` member.created events in one transaction, as billing's own writes do; resolves with the commit time. */
    const commit = async (ids) => {
      const rows = ids.map((id) => ({ id, data: { id: randomUUID(), merchantId: merchant.id, email: `${id}@example.com`, firstName: 'Bench', lastName: 'Member', phone: null } }));
      await pool.query(
        `insert into "billing"."outbox" ("id", "type", "merchant_id", "data", "occurred_at", "trace_context")
         select x."id", 'member.created', $1, x."data", now(), '{}' from jsonb_to_recordset($2::jsonb) as x("id" uuid, "data" jsonb)`,
        [merchant.id, JSON.stringify(rows)],
      );
      return now();
    };

    // The endpoint reaches the webhooks service's read model through identity's events.
    for (let i = 0; ; i++) {
      const probe = randomUUID();
      await commit([probe]);
      if ((await arrivalsOf(receiver, [probe], 1000)).missing === 0) break;
      if (i > 60) throw new Error('the webhook endpoint never became active');
    }

    // Warm-up: connections, JIT, caches.
    const warm = Array.from({ length: 2000 }, () => randomUUID());
    for (let i = 0; i < warm.length; i += 200) await commit(warm.slice(i, i + 200));
    await arrivalsOf(receiver, warm, 60_000);

    const raw = await rawSignedPosts(receiver, key.signingSecret, Math.max(5000, 1000 * duration), 32);

    // Steady 500 events/s, one event per commit, for `duration` seconds.
    await receiver.call({ reset: true });
    const rate = 500;
    const total = rate * duration;
    const committed = new Map();
    const ids = Array.from({ length: total }, () => randomUUID());
    const start = now();
    const inFlight = [];
    // Every 5 ms, start the commits that are due by then: one event per transaction.
    for (let issued = 0; issued < total; ) {
      const due = Math.min(total, Math.floor(((now() - start) * rate) / 1000) + 1);
      for (; issued < due; issued++) {
        const id = ids[issued];
        inFlight.push(commit([id]).then((t) => committed.set(id, t)));
      }
      await sleep(5);
    }
    await Promise.all(inFlight);
    const steady = await arrivalsOf(receiver, ids, 60_000);
    const steadyLat = ids.filter((id) => steady.arrivals.has(id)).map((id) => steady.arrivals.get(id) - committed.get(id)).sort((a, b) => a - b);
    const steadyEnd = Math.max(...steady.arrivals.values());

    // Burst: commit a backlog as fast as the database takes it, then time the drain.
    await receiver.call({ reset: true });
    const burstN = Number(process.env.BENCH_WEBHOOK_BURST ?? 20_000);
    const burstIds = Array.from({ length: burstN }, () => randomUUID());
    const burstCommitted = new Map();
    const burstStart = now();
    const chunks = [];
    for (let i = 0; i < burstN; i += 250) chunks.push(burstIds.slice(i, i + 250));
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let c = chunks.shift(); c; c = chunks.shift()) {
          const t = await commit(c);
          for (const id of c) burstCommitted.set(id, t);
        }
      }),
    );
    const burstCommitEnd = now();
    const burst = await arrivalsOf(receiver, burstIds, 120_000);
    const burstEnd = Math.max(...burst.arrivals.values());
    const burstLat = burstIds.filter((id) => burst.arrivals.has(id)).map((id) => burst.arrivals.get(id) - burstCommitted.get(id)).sort((a, b) => a - b);
    const burstRate = burst.arrivals.size / ((burstEnd - burstStart) / 1000);

    return [
      { name: 'baseline: signed POST, Node → receiver', connections: 32, rps: raw.rps, p50: raw.p50, p99: raw.p99, errors: raw.errors },
      {
        name: `commit → verified delivery @ ${rate} events/s`,
        rps: steady.arrivals.size / ((steadyEnd - start) / 1000),
        p50: percentile(steadyLat, 50),
        p99: percentile(steadyLat, 99),
        non2xx: steady.invalid,
        errors: steady.missing,
      },
      {
        name: `commit → verified delivery, burst of ${burstN} (committed in ${Math.round(burstCommitEnd - burstStart)} ms)`,
        rps: burstRate,
        p50: percentile(burstLat, 50),
        p99: percentile(burstLat, 99),
        non2xx: burst.invalid,
        errors: burst.missing,
        ratio: burstRate / raw.rps,
      },
    ];
  } finally {
    await pool.end();
    await receiver.stop();
  }
}

/** `n` signed POSTs (HMAC per request, as the webhooks service does) over `connections` keep-alive sockets. */
async function rawSignedPosts(receiver, secret, n, connections) {
  await receiver.call({ reset: true });
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const latencies = [];
  let errors = 0;
  let next = 0;
  const post = () =>
    new Promise((resolve) => {
      const id = randomUUID();
      const body = JSON.stringify({ id, type: 'member.created', timestamp: new Date().toISOString(), merchantId: randomUUID(), data: { id: randomUUID(), email: `${id}@example.com`, firstName: 'Bench', lastName: 'Member', phone: null } });
      const ts = Math.floor(Date.now() / 1000);
      const sig = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
      const t0 = now();
      const req = http.request(
        { host: '127.0.0.1', port: receiver.port, path: '/hook', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${sig}` } },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode >= 300) errors++;
            latencies.push(now() - t0);
            resolve();
          });
        },
      );
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(body);
    });
  const started = now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next++ < n) await post();
    }),
  );
  const seconds = (now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { rps: n / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors };
}
