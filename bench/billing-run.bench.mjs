// One billing run over BENCH_BILLING_SUBSCRIPTIONS (default 100,000) due subscriptions with card
// payment methods, on a fresh database, against the out-of-process sandbox provider:
// POST /api/admin/billing-runs → billing claims due subscriptions in chunks (FOR UPDATE SKIP
// LOCKED), writes Processing charges, calls the provider with a bounded pool, records outcomes
// and outbox events. Beside it, the bare per-charge floor measured in the same run with the
// same concurrency: one provider POST plus one single-row INSERT transaction per charge.
// The subscriptions are seeded with bulk SQL, not through the API.
//
// Both sides talk to the sandbox over kept-alive connections, as many as calls in flight. The
// sandbox runs without OpenTelemetry here: it stands in for an external provider, whose CPU is
// not the platform's (billing keeps its telemetry on, as deployed). Besides rates the bench
// prints the CPU time billing and the sandbox spent per charge, which a busy machine distorts
// far less than rates, and the load average before and after.
//
// Environment: BENCH_BILLING_SUBSCRIPTIONS (default 100000), BENCH_BILLING_BASELINE (charges of
// the baseline, default min(subscriptions, 30000)), BENCH_CPU_PROFILE (a directory: billing and
// the sandbox write .cpuprofile files there, see cpu-profile.cjs), BENCH_BILLING_TRACE=1 with
// BENCH_LOGS=1 (billing logs each chunk's phase timings).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { standInForAutovacuum } from './load.mjs';

export const name = 'billing-run';
export const services = ['sandbox-provider', 'identity', 'billing', 'gateway'];

const SUBSCRIPTIONS = Number(process.env.BENCH_BILLING_SUBSCRIPTIONS ?? 100_000);
const BASELINE_CHARGES = Number(process.env.BENCH_BILLING_BASELINE ?? Math.min(SUBSCRIPTIONS, 30_000));
const WORKERS = 4;
const CONCURRENCY = 48;
const CHUNK = 1000;
const DB_POOL = 10;
const IN_FLIGHT = WORKERS * CONCURRENCY;

const profile = process.env.BENCH_CPU_PROFILE
  ? { NODE_OPTIONS: `-r ${path.join(path.dirname(fileURLToPath(import.meta.url)), 'cpu-profile.cjs')}`, BENCH_CPU_PROFILE: path.resolve(process.env.BENCH_CPU_PROFILE) }
  : {};

export const serviceEnv = {
  billing: {
    BILLING_RUN_WORKERS: String(WORKERS),
    BILLING_RUN_CONCURRENCY: String(CONCURRENCY),
    BILLING_RUN_CHUNK_SIZE: String(CHUNK),
    DB_POOL_MAX: String(DB_POOL),
    PAYMENT_PROVIDER_MAX_SOCKETS: String(IN_FLIGHT),
    // Only the measured run: no scheduled run completing (and counting) what it left unconfirmed.
    BILLING_RUN_INTERVAL_MS: '0',
    // A loaded machine answers slowly; a timed-out call is left for the next run, not counted.
    PAYMENT_PROVIDER_TIMEOUT_MS: '15000',
    ...(process.env.BENCH_BILLING_TRACE === '1' ? { LOG_LEVEL: 'debug' } : {}),
    ...profile,
  },
  'sandbox-provider': { OTEL_SDK_DISABLED: 'true', ...profile },
};

const AS_OF = '2030-01-01T00:00:00.000Z';

export async function seed(databaseUrl) {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const merchantId = randomUUID();
    const productId = randomUUID();
    const planId = randomUUID();
    await db.query('begin');
    await db.query(
      `insert into billing.merchants (id, name, contact_email, gateway_configured, provider_environment, created_at, updated_at)
       values ($1, 'Bench merchant', 'bench@example.com', true, 'Staging', now(), now())`,
      [merchantId],
    );
    await db.query(`insert into billing.products (id, merchant_id, name, created_at, updated_at) values ($1, $2, 'Bench product', now(), now())`, [productId, merchantId]);
    await db.query(
      `insert into billing.plans (id, merchant_id, product_id, name, amount_minor, currency, billing_interval, created_at, updated_at)
       values ($1, $2, $3, 'Monthly', 1995, 'AUD', 'Month', now(), now())`,
      [planId, merchantId, productId],
    );
    // Bulk SQL: members, one card each, one subscription each, due within the last 1000 s (the anchor
    // is the due time, so one charge makes the next period due a month later).
    await db.query(
      `create temporary table seed as select gen_random_uuid() as member_id, gen_random_uuid() as pm_id, gen_random_uuid() as sub_id, g as n from generate_series(1, $1) g`,
      [SUBSCRIPTIONS],
    );
    await db.query(
      `insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at)
       select member_id, $1, 'member' || n || '@bench.example', 'Bench', 'Member', now(), now() from seed`,
      [merchantId],
    );
    await db.query(
      `insert into billing.payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, rank, created_at, updated_at)
       select pm_id, $1, member_id, 'Card', 'Visa', '4242', 12, 2099, 1, now(), now() from seed`,
      [merchantId],
    );
    await db.query(
      `insert into billing.subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, status, current_period_start, current_period_end,
                                          next_billing_at, billing_anchor, created_at, updated_at)
       select sub_id, $1, member_id, $2, pm_id, 'Active', due, due + interval '1 month', due, due, now(), now()
         from (select *, $3::timestamptz - (n % 1000) * interval '1 second' as due from seed) s`,
      [merchantId, planId, AS_OF],
    );
    await db.query('commit');
    await db.query('analyze billing.subscriptions; analyze billing.payment_methods; analyze billing.members');
    return merchantId;
  } finally {
    await db.end();
  }
}

/** Peak (VmHWM) or current (VmRSS) resident set size of a process, in MiB. */
function rssMiB(pid, which = 'VmHWM') {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(new RegExp(`${which}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return kb / 1024;
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU time (user + system) a process has used so far, in seconds. */
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** CPU seconds of each process while `fn` runs. */
async function measureCpu(pids, fn) {
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
  const result = await fn();
  const cpu = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid) - before[k]]));
  return { result, cpu };
}

/**
 * CPU seconds the Postgres backends serving `databaseUrl` (other than this probe's) used while
 * `fn` runs; backends started meanwhile count from zero, ones that ended are missed. Null when
 * the server is not on this machine (its backends' /proc entries are not readable).
 */
async function measurePostgresCpu(databaseUrl, fn) {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const backends = async () =>
    (await db.query('select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()')).rows.map((r) => r.pid);
  const read = (pid) => {
    try {
      return cpuSeconds(pid);
    } catch {
      return null;
    }
  };
  try {
    const before = new Map((await backends()).map((pid) => [pid, read(pid)]));
    const result = await fn();
    let seconds = 0;
    for (const pid of await backends()) {
      const now = read(pid);
      if (now === null) return { result, seconds: null };
      seconds += now - (before.get(pid) ?? 0);
    }
    return { result, seconds };
  } finally {
    await db.end();
  }
}

/** POST of a JSON body over a kept-alive agent; resolves to the parsed answer. */
function postJson(agent, url, headers, body) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => (res.statusCode === 201 ? resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))) : reject(new Error(`sandbox answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** The floor: per charge one provider POST and one single-row INSERT transaction, IN_FLIGHT at once. */
async function baseline(databaseUrl, sandboxUrl) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: DB_POOL });
  const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  await pool.query('create table if not exists public.bench_baseline (id uuid primary key, provider_ref text not null, amount_minor bigint not null, created_at timestamptz not null)');
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < BASELINE_CHARGES) {
        next++;
        const id = randomUUID();
        const charge = await postJson(agent, `${sandboxUrl}/v1/charges`, { 'sandbox-account': 'bench-baseline', 'idempotency-key': id }, {
          amountMinor: 1995,
          currency: 'AUD',
          paymentMethod: { type: 'Card', last4: '4242' },
        });
        await pool.query('insert into public.bench_baseline (id, provider_ref, amount_minor, created_at) values ($1, $2, $3, now())', [id, charge.id, 1995]);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  // Closed by the caller, once the CPU of its Postgres backends has been read.
  const close = async () => {
    agent.destroy();
    await pool.end();
  };
  return { rate: BASELINE_CHARGES / seconds, seconds, close };
}

const loadAverage = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');

export async function run({ platform, databaseUrl }) {
  const loadBefore = loadAverage();
  console.log(`bench: billing-run: seeding ${SUBSCRIPTIONS} due subscriptions with bulk SQL (load average ${loadBefore})`);
  const seeding = performance.now();
  const merchantId = await seed(databaseUrl);
  console.log(`bench: billing-run: seeded in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
  // Where the server runs without autovacuum, what it would have done after the bulk load (see load.mjs).
  const vacuumMs = await standInForAutovacuum(databaseUrl);
  if (vacuumMs !== undefined) console.log(`bench: billing-run: the server runs without autovacuum; vacuumed and analyzed the seeded database as it would (${(vacuumMs / 1000).toFixed(1)} s)`);
  const sandboxUrl = platform.processes['sandbox-provider'].address;
  const billingPid = platform.processes.billing.pid;
  const sandboxPid = platform.processes['sandbox-provider'].pid;

  console.log('bench: billing-run: baseline');
  const { result: { result: base, cpu: baseCpu }, seconds: basePostgresCpu } = await measurePostgresCpu(databaseUrl, () =>
    measureCpu({ sandbox: sandboxPid, bench: process.pid }, () => baseline(databaseUrl, sandboxUrl)),
  );
  await base.close();

  const rssBefore = rssMiB(billingPid, 'VmRSS');
  console.log(`bench: billing-run: billing run (billing RSS before it ${rssBefore.toFixed(0)} MiB)`);
  const started = performance.now();
  const { result: { result: res, cpu }, seconds: postgresCpu } = await measurePostgresCpu(databaseUrl, () => measureCpu({ billing: billingPid, sandbox: sandboxPid }, async () => {
    const r = await fetch(`${platform.gatewayUrl}/api/admin/billing-runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ asOf: AS_OF }),
    });
    return { status: r.status, body: await r.json() };
  }));
  const body = res.body;
  const seconds = (performance.now() - started) / 1000;
  if (res.status !== 200) throw new Error(`billing run: ${res.status} ${JSON.stringify(body)}`);
  const rss = rssMiB(billingPid);
  const perCharge = (s, n) => (s === null ? 'n/a' : `${Math.round((s * 1e6) / n)} µs`);

  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const settled = (await db.query(`select count(*)::int as n, coalesce(sum(amount_minor), 0)::bigint as total from billing.transactions where merchant_id = $1 and status = 'Settled'`, [merchantId])).rows[0];
  await db.end();
  const ledger = await (await fetch(`${sandboxUrl}/__sandbox/ledger?account=${merchantId}`)).json();
  const ledgerTotal = ledger.charges.reduce((n, c) => n + c.amountMinor, 0);

  const rate = body.succeeded / seconds;
  console.log(
    `bench: billing-run: ${JSON.stringify(body)} in ${seconds.toFixed(2)} s → ${Math.round(rate)} charges/s; settled ${settled.n} (${settled.total} minor units), ` +
      `provider ledger ${ledger.charges.length} charges (${ledgerTotal} minor units); billing peak RSS ${rss.toFixed(0)} MiB; ` +
      `baseline ${Math.round(base.rate)} charges/s (${BASELINE_CHARGES} in ${base.seconds.toFixed(2)} s); ratio ${(rate / base.rate).toFixed(2)}`,
  );
  console.log(
    `bench: billing-run: CPU per charge: billing run: billing ${perCharge(cpu.billing, body.succeeded)}, sandbox ${perCharge(cpu.sandbox, body.succeeded)}, ` +
      `Postgres ${perCharge(postgresCpu, body.succeeded)}; baseline: bench process ${perCharge(baseCpu.bench, BASELINE_CHARGES)}, ` +
      `sandbox ${perCharge(baseCpu.sandbox, BASELINE_CHARGES)}, Postgres ${perCharge(basePostgresCpu, BASELINE_CHARGES)}; ` +
      `load average before ${loadBefore}, after ${loadAverage()} (${os.cpus().length} CPUs)`,
  );
  if (settled.n !== SUBSCRIPTIONS || ledger.charges.length !== SUBSCRIPTIONS) throw new Error(`expected ${SUBSCRIPTIONS} settled charges, each once in the provider ledger`);
  return [
    { name: `baseline: provider POST + single-row INSERT (${IN_FLIGHT} in flight)`, connections: IN_FLIGHT, rps: base.rate },
    { name: `billing run: ${SUBSCRIPTIONS} subscriptions, ${seconds.toFixed(1)} s wall, billing peak RSS ${rss.toFixed(0)} MiB`, connections: IN_FLIGHT, rps: rate, ratio: rate / base.rate },
  ];
}
