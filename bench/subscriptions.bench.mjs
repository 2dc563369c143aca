// POST /api/Subscriptions with an API key, a fresh Idempotency-Key and a new member per request:
// gateway (auth, idempotency claim + outcome in Postgres) → gRPC → billing (checks, insert,
// outbox) → Postgres; beside a bare fastify doing one INSERT per request (bench/baseline/
// fastify-insert.mjs) measured in the same run with the same load. Members, product and plan
// are created before timing.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { spawnWithPort } from './load.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const name = 'POST /api/Subscriptions';

/** Requests per measured run (each needs its own member); BENCH_SUBSCRIPTIONS overrides. */
const REQUESTS = Number(process.env.BENCH_SUBSCRIPTIONS ?? 6000);
const WARMUP = Math.min(1000, Math.ceil(REQUESTS / 5));

async function call(baseUrl, method, urlPath, token, body, expected) {
  const res = await fetch(`${baseUrl}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => undefined);
  if (!expected.includes(res.status)) throw new Error(`${method} ${urlPath}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Runs `count` tasks with at most `width` at a time. */
async function inParallel(count, width, task) {
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
 * Sends exactly `bodies.length` POSTs over `connections` connections, body i to request i, each
 * with its own Idempotency-Key. Latencies in ms.
 */
async function load({ url, connections, headers, bodies }) {
  let next = 0;
  const statuses = {};
  const r = await autocannon({
    url,
    connections,
    amount: bodies.length,
    timeout: 30,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => ({
          ...req,
          headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
          body: JSON.stringify(bodies[next++ % bodies.length]),
        }),
        onResponse: (status) => {
          statuses[status] = (statuses[status] ?? 0) + 1;
        },
      },
    ],
  });
  return {
    rps: r['2xx'] / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    statuses,
  };
}

export async function run({ platform, connections = 64 }) {
  const gw = platform.gatewayUrl;
  const merchant = await call(gw, 'POST', '/api/admin/merchants', platform.adminToken, { name: 'Bench Subscriptions Co', contactEmail: 'bench-subs@example.com' }, [201]);
  const { key } = await call(gw, 'POST', `/api/admin/merchants/${merchant.id}/api-keys`, platform.adminToken, { name: 'bench' }, [201]);
  const product = await call(gw, 'POST', '/api/Products', key, { merchantId: merchant.id, name: 'Bench product' }, [201]);
  const plan = await call(gw, 'POST', '/api/Plans', key, { merchantId: merchant.id, productId: product.id, name: 'Monthly', amount: 19.95, interval: 'Month' }, [201]);

  const total = WARMUP + REQUESTS;
  const tag = randomUUID().slice(0, 8);
  const members = await inParallel(total, 16, (i) =>
    call(gw, 'POST', '/api/Members', key, { merchantId: merchant.id, email: `m${i}-${tag}@bench.example.com`, firstName: 'Bench', lastName: `Member ${i}` }, [200, 201]),
  );
  const bodies = members.map((m) => ({ merchantId: merchant.id, memberId: m.id, planId: plan.id }));
  const warmupBodies = bodies.slice(0, WARMUP);
  const measuredBodies = bodies.slice(WARMUP);

  const baselineProc = await spawnWithPort(path.join(here, 'baseline/fastify-insert.mjs'), { DATABASE_URL: platform.databaseUrl });
  let baseline;
  try {
    const scratchUrl = `http://127.0.0.1:${baselineProc.port}/scratch`;
    await load({ url: scratchUrl, connections, headers: {}, bodies: warmupBodies });
    baseline = await load({ url: scratchUrl, connections, headers: {}, bodies: measuredBodies });
  } finally {
    await baselineProc.stop();
  }
  const auth = { authorization: `Bearer ${key}` };
  const warm = await load({ url: `${gw}/api/Subscriptions`, connections, headers: auth, bodies: warmupBodies });
  const real = await load({ url: `${gw}/api/Subscriptions`, connections, headers: auth, bodies: measuredBodies });

  const listed = await call(gw, 'GET', `/api/Subscriptions?merchantId=${merchant.id}&pageSize=1`, key, undefined, [200]);
  const created = (real.statuses[201] ?? 0) + (warm.statuses[201] ?? 0);
  if (listed.totalCount !== created) console.warn(`bench: ${listed.totalCount} subscriptions listed, ${created} created (201)`);
  if (real.non2xx) console.warn(`bench: non-2xx statuses: ${JSON.stringify(real.statuses)}`);

  return [
    { name: 'baseline: fastify + one INSERT', connections, ...baseline },
    { name: 'POST /api/Subscriptions (API key, new key each)', connections, ...real, ratio: real.rps / baseline.rps },
  ];
}
