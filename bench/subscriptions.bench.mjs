// POST /api/Subscriptions with an API key, a fresh Idempotency-Key and a new member per request:
// gateway (auth, idempotency claim + outcome in Postgres) → gRPC → billing (checks, insert,
// outbox) → Postgres; beside a bare fastify doing one INSERT per request (bench/baseline/
// fastify-insert.mjs) measured in the same run with the same load. Members, product and plan
// are created before timing.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, inParallel, loadRequests, spawnWithPort, standInForAutovacuum } from './load.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const name = 'POST /api/Subscriptions';

/** Requests per measured run (each needs its own member); BENCH_SUBSCRIPTIONS overrides. */
const REQUESTS = Number(process.env.BENCH_SUBSCRIPTIONS ?? 6000);
const WARMUP = Math.min(1000, Math.ceil(REQUESTS / 5));

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
  const bodies = members.map((m) => ({ body: { merchantId: merchant.id, memberId: m.id, planId: plan.id } }));
  const warmupBodies = bodies.slice(0, WARMUP);
  const measuredBodies = bodies.slice(WARMUP);

  // Where the server runs without autovacuum, what it would have done after the set-up (see load.mjs).
  await standInForAutovacuum(platform.databaseUrl);
  const baselineProc = await spawnWithPort(path.join(here, 'baseline/fastify-insert.mjs'), { DATABASE_URL: platform.databaseUrl });
  let baseline;
  try {
    const scratchUrl = `http://127.0.0.1:${baselineProc.port}/scratch`;
    await loadRequests({ url: scratchUrl, connections, headers: {}, requests: warmupBodies });
    baseline = await loadRequests({ url: scratchUrl, connections, headers: {}, requests: measuredBodies });
  } finally {
    await baselineProc.stop();
  }
  const auth = { authorization: `Bearer ${key}` };
  const warm = await loadRequests({ url: `${gw}/api/Subscriptions`, connections, headers: auth, requests: warmupBodies });
  const real = await loadRequests({ url: `${gw}/api/Subscriptions`, connections, headers: auth, requests: measuredBodies });

  const listed = await call(gw, 'GET', `/api/Subscriptions?merchantId=${merchant.id}&pageSize=1`, key, undefined, [200]);
  const created = (real.statuses[201] ?? 0) + (warm.statuses[201] ?? 0);
  if (listed.totalCount !== created) console.warn(`bench: ${listed.totalCount} subscriptions listed, ${created} created (201)`);
  if (real.non2xx) console.warn(`bench: non-2xx statuses: ${JSON.stringify(real.statuses)}`);

  return [
    { name: 'baseline: fastify + one INSERT', connections, ...baseline },
    { name: 'POST /api/Subscriptions (API key, new key each)', connections, ...real, ratio: real.rps / baseline.rps },
  ];
}
