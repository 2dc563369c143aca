// One billing run over BENCH_BILLING_SUBSCRIPTIONS (default 100,000) due subscriptions with card
// payment methods, on a fresh database, against the out-of-process sandbox provider:
// POST /api/admin/billing-runs → billing claims due subscriptions in chunks (FOR UPDATE SKIP
// LOCKED), writes Processing charges, calls the provider with a bounded pool, records outcomes
// and outbox events. Beside it, the bare per-charge floor measured in the same run with the
// same concurrency: one provider POST plus one single-row INSERT transaction per charge.
// The subscriptions are seeded with bulk SQL, not through the API.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import pg from 'pg';

export const name = 'billing-run';
export const services = ['sandbox-provider', 'identity', 'billing', 'gateway'];

const SUBSCRIPTIONS = Number(process.env.BENCH_BILLING_SUBSCRIPTIONS ?? 100_000);
const BASELINE_CHARGES = Number(process.env.BENCH_BILLING_BASELINE ?? Math.min(SUBSCRIPTIONS, 30_000));
const WORKERS = 4;
const CONCURRENCY = 48;
const CHUNK = 1000;
const DB_POOL = 10;

export const serviceEnv = {
  billing: {
    BILLING_RUN_WORKERS: String(WORKERS),
    BILLING_RUN_CONCURRENCY: String(CONCURRENCY),
    BILLING_RUN_CHUNK_SIZE: String(CHUNK),
    DB_POOL_MAX: String(DB_POOL),
    // Only the measured run: no scheduled run completing (and counting) what it left unconfirmed.
    BILLING_RUN_INTERVAL_MS: '0',
    // A loaded machine answers slowly; a timed-out call is left for the next run, not counted.
    PAYMENT_PROVIDER_TIMEOUT_MS: '15000',
  },
};

const AS_OF = '2030-01-01T00:00:00.000Z';

async function seed(databaseUrl) {
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

/** Peak resident set size (VmHWM) of a process, in MiB. */
function peakRssMiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

/** The floor: per charge one provider POST and one single-row INSERT transaction, CONCURRENCY × WORKERS in flight. */
async function baseline(databaseUrl, sandboxUrl) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: DB_POOL });
  await pool.query('create table if not exists public.bench_baseline (id uuid primary key, provider_ref text not null, amount_minor bigint not null, created_at timestamptz not null)');
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS * CONCURRENCY }, async () => {
      while (next < BASELINE_CHARGES) {
        next++;
        const id = randomUUID();
        const res = await fetch(`${sandboxUrl}/v1/charges`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'sandbox-account': 'bench-baseline', 'idempotency-key': id },
          body: JSON.stringify({ amountMinor: 1995, currency: 'AUD', paymentMethod: { type: 'Card', last4: '4242' } }),
        });
        const charge = await res.json();
        await pool.query('insert into public.bench_baseline (id, provider_ref, amount_minor, created_at) values ($1, $2, $3, now())', [id, charge.id, 1995]);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await pool.end();
  return { rate: BASELINE_CHARGES / seconds, seconds };
}

export async function run({ platform, databaseUrl }) {
  console.log(`bench: billing-run: seeding ${SUBSCRIPTIONS} due subscriptions with bulk SQL`);
  const merchantId = await seed(databaseUrl);
  const sandboxUrl = platform.processes['sandbox-provider'].address;
  const billingPid = platform.processes.billing.pid;

  console.log('bench: billing-run: baseline');
  const base = await baseline(databaseUrl, sandboxUrl);

  console.log('bench: billing-run: billing run');
  const started = performance.now();
  const res = await fetch(`${platform.gatewayUrl}/api/admin/billing-runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ asOf: AS_OF }),
  });
  const body = await res.json();
  const seconds = (performance.now() - started) / 1000;
  if (res.status !== 200) throw new Error(`billing run: ${res.status} ${JSON.stringify(body)}`);
  const rss = peakRssMiB(billingPid);

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
  if (settled.n !== SUBSCRIPTIONS || ledger.charges.length !== SUBSCRIPTIONS) throw new Error(`expected ${SUBSCRIPTIONS} settled charges, each once in the provider ledger`);
  return [
    { name: `baseline: provider POST + single-row INSERT (${WORKERS * CONCURRENCY} in flight)`, connections: WORKERS * CONCURRENCY, rps: base.rate },
    { name: `billing run: ${SUBSCRIPTIONS} subscriptions, ${seconds.toFixed(1)} s wall, billing peak RSS ${rss.toFixed(0)} MiB`, connections: WORKERS * CONCURRENCY, rps: rate, ratio: rate / base.rate },
  ];
}
