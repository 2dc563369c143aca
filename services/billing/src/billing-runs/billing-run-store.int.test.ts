import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { MIGRATIONS } from '../migrations/index.js';
import { BillingConfig } from '../config.js';
import { Subscription } from '../subscriptions/subscription.js';
import { Transaction } from '../transactions/transaction.js';
import { DUE_SUBSCRIPTIONS_SQL, TRIED_CHARGES_SQL } from './billing-run.js';
import { insertTransactions, loadSubscriptions, outcomesJson, RECORD_OUTCOMES_SQL, saveBillingStates, type RecordedOutcome } from './billing-run-store.js';

// The billing run's hand-written SQL against a real database: what it reads and writes is what
// the ORM reads (so a column added to an entity and missed here fails), and a provider answer is
// recorded once.

const { orm, url } = useMigratedDatabase({
  open: (databaseUrl) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: databaseUrl })),
  schema: 'billing',
  migrations: MIGRATIONS,
});
let db: pg.Client;

beforeAll(async () => {
  db = new pg.Client({ connectionString: url() });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
});

const at = (iso: string) => new Date(iso);

/** Records answers with `RECORD_OUTCOMES_SQL` alone (its guard), in `em`'s transaction; the ids it recorded. */
async function recordOutcomes(em: EntityManager, outcomes: RecordedOutcome[], when: Date): Promise<Set<string>> {
  return new Set((await queryRows<{ id: string }>(em, RECORD_OUTCOMES_SQL, [when.toISOString(), outcomesJson(outcomes)])).map((r) => r.id));
}

/** A subscription with every column set, each instant distinct. */
async function seedSubscription(): Promise<{ subscriptionId: string; merchantId: string; memberId: string; paymentMethodId: string }> {
  const [merchantId, productId, planId, memberId, paymentMethodId, subscriptionId] = Array.from({ length: 6 }, () => randomUUID());
  await db.query(`insert into billing.merchants (id, name, contact_email, gateway_configured, provider_environment, created_at, updated_at) values ($1, 'M', 'm@example.com', true, 'Staging', now(), now())`, [merchantId]);
  await db.query(`insert into billing.products (id, merchant_id, name, created_at, updated_at) values ($1, $2, 'P', now(), now())`, [productId, merchantId]);
  await db.query(
    `insert into billing.plans (id, merchant_id, product_id, name, amount_minor, currency, billing_interval, created_at, updated_at) values ($1, $2, $3, 'Monthly', 1995, 'AUD', 'Month', now(), now())`,
    [planId, merchantId, productId],
  );
  await db.query(`insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at) values ($1, $2, 'a@example.com', 'A', 'B', now(), now())`, [memberId, merchantId]);
  await db.query(
    `insert into billing.payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, rank, created_at, updated_at) values ($1, $2, $3, 'Card', 'Visa', '4242', 12, 2099, 1, now(), now())`,
    [paymentMethodId, merchantId, memberId],
  );
  await db.query(
    `insert into billing.subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, status, current_period_start, current_period_end, next_billing_at, billing_anchor,
                                        cancel_at_period_end, paused_at, resume_at, cancelled_at, dunning_period_start, dunning_started_at, retry_count, claimed_until, created_at, updated_at)
     values ($1, $2, $3, $4, $5, 'PastDue', '2030-01-01T00:00:00.123Z', '2030-02-01T00:00:00Z', '2030-01-04T00:00:00Z', '2029-12-01T08:30:00Z',
             true, '2029-12-10T00:00:00Z', '2029-12-11T00:00:00Z', '2029-12-12T00:00:00Z', '2030-01-01T00:00:00Z', '2030-01-02T00:00:00Z', 2, '2030-01-03T00:00:00Z',
             '2029-11-01T00:00:00Z', '2029-11-02T00:00:00Z')`,
    [subscriptionId, merchantId, memberId, planId, paymentMethodId],
  );
  return { subscriptionId, merchantId, memberId, paymentMethodId };
}

/** `n` new members of the merchant with a subscription each to the plan, due an hour ago or in a month; their ids. */
async function subscribeMembers(merchantId: string, planId: string, n: number, due: boolean): Promise<{ id: string; member_id: string }[]> {
  const { rows } = await db.query<{ id: string; member_id: string }>(
    `with m as (insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at)
                select gen_random_uuid(), $1, gen_random_uuid() || '@example.com', 'A', 'B', now(), now() from generate_series(1, $3::int) returning id)
     insert into billing.subscriptions (id, merchant_id, member_id, plan_id, status, current_period_start, current_period_end, next_billing_at, billing_anchor, created_at, updated_at)
     select gen_random_uuid(), $1, m.id, $2, 'Active', now() - interval '1 month', now(), now() + case when $4 then interval '-1 hour' else interval '1 month' end, now(), now(), now()
       from m returning id, member_id`,
    [merchantId, planId, n, due],
  );
  return rows;
}

/** A node of `explain (analyze, format json)`. */
type PlanNode = { 'Actual Loops'?: number; 'Rows Removed by Filter'?: number; 'Rows Removed by Join Filter'?: number; Plans?: PlanNode[] };

/** The rows a plan's nodes looked at and dropped, over all their loops. */
const rowsRemoved = (n: PlanNode): number =>
  ((n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Join Filter'] ?? 0)) * (n['Actual Loops'] ?? 1) + (n.Plans ?? []).reduce((sum, c) => sum + rowsRemoved(c), 0);

/** `sql` (with `?` placeholders, as `queryRows` takes it) numbered for node-postgres. */
const numbered = (sql: string) => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

describe('billing run store', () => {
  it('reads a subscription exactly as the ORM does, every property included', async () => {
    const { subscriptionId } = await seedSubscription();
    const [loaded] = await loadSubscriptions(orm().em.fork(), [subscriptionId]);
    const viaOrm = await orm().em.fork().findOneOrFail(Subscription, { id: subscriptionId });
    const props = Object.keys(orm().getMetadata().get(Subscription.name).properties);
    for (const p of props) expect(loaded![p as keyof Subscription], p).not.toBeUndefined();
    expect({ ...loaded }).toEqual({ ...viaOrm });
  });

  it('writes the billing state the domain computed, and nothing else', async () => {
    const { subscriptionId } = await seedSubscription();
    const [sub] = await loadSubscriptions(orm().em.fork(), [subscriptionId]);
    // The billing state a run writes.
    const state = {
      status: 'Paused' as const,
      currentPeriodStart: at('2030-03-01T00:00:00Z'),
      currentPeriodEnd: at('2030-04-01T00:00:00Z'),
      nextBillingAt: null,
      pausedAt: at('2030-03-05T00:00:00Z'),
      resumeAt: null,
      cancelledAt: null,
      dunningPeriodStart: null,
      dunningStartedAt: null,
      retryCount: 0,
      claimedUntil: null,
      updatedAt: at('2030-03-05T00:00:01Z'),
    };
    // Not billing state: never written by a run.
    Object.assign(sub!, { ...state, cancelAtPeriodEnd: false, billingAnchor: at('2000-01-01T00:00:00Z') });
    await orm().em.fork().transactional((em) => saveBillingStates(em, [sub!]));
    const after = await orm().em.fork().findOneOrFail(Subscription, { id: subscriptionId });
    expect(after).toMatchObject({ ...state, cancelAtPeriodEnd: true, billingAnchor: at('2029-12-01T08:30:00Z') });
  });

  it('inserts charges the ORM reads back whole, and records a provider answer only once', async () => {
    const { subscriptionId, merchantId, memberId, paymentMethodId } = await seedSubscription();
    const charge = Object.assign(new Transaction(), {
      merchantId,
      memberId,
      subscriptionId,
      paymentMethodId,
      kind: 'Charge' as const,
      amountMinor: 1995,
      currency: 'AUD',
      attempt: 3,
      periodStart: at('2030-01-01T00:00:00Z'),
      feeMinor: 60,
      claimedUntil: at('2030-01-04T00:02:00Z'),
      occurredAt: at('2030-01-04T00:00:00Z'),
    });
    await orm().em.fork().transactional((em) => insertTransactions(em, [charge]));
    const { pending: _, ...expected } = charge as unknown as Record<string, unknown>;
    expect({ ...(await orm().em.fork().findOneOrFail(Transaction, { id: charge.id })) }).toEqual(expect.objectContaining(expected));

    const answer = { id: charge.id, status: 'Settled' as const, providerRef: 'ch_1', failureReason: null, settledAt: at('2030-01-04T00:00:00Z') };
    const first = await orm().em.fork().transactional((em) => recordOutcomes(em, [answer], at('2030-01-04T00:00:00Z')));
    expect([...first]).toEqual([charge.id]);
    // A second answer (a reconciling run's, or a late one) changes nothing.
    const second = await orm().em.fork().transactional((em) => recordOutcomes(em, [{ ...answer, status: 'Failed', providerRef: 'ch_2', failureReason: 'card_declined', settledAt: null }], at('2030-01-05T00:00:00Z')));
    expect(second.size).toBe(0);
    expect(await orm().em.fork().findOneOrFail(Transaction, { id: charge.id })).toMatchObject({ status: 'Settled', providerRef: 'ch_1', failureReason: null, claimedUntil: null, settledAt: at('2030-01-04T00:00:00Z') });

    // A bank charge stays Processing once confirmed; a repeated answer does not settle it (only settlement does).
    const bank = Object.assign(new Transaction(), { ...charge, id: randomUUID(), attempt: 4 });
    await orm().em.fork().transactional((em) => insertTransactions(em, [bank]));
    const processing = { id: bank.id, status: 'Processing' as const, providerRef: 'ch_b', failureReason: null, settledAt: null };
    expect((await orm().em.fork().transactional((em) => recordOutcomes(em, [processing], at('2030-01-04T00:00:00Z')))).size).toBe(1);
    expect((await orm().em.fork().transactional((em) => recordOutcomes(em, [{ ...processing, status: 'Settled', settledAt: at('2030-01-05T00:00:00Z') }], at('2030-01-05T00:00:00Z')))).size).toBe(0);
    expect(await orm().em.fork().findOneOrFail(Transaction, { id: bank.id })).toMatchObject({ status: 'Processing', providerRef: 'ch_b', settledAt: null });
  });
  it('claims due subscriptions past the unconfirmed calls read once, even in a plan made while no call was unconfirmed', async () => {
    const { merchantId } = await seedSubscription();
    const [{ plan_id: planId }] = (await db.query<{ plan_id: string }>(`select plan_id from billing.subscriptions where merchant_id = $1`, [merchantId])).rows;
    const subscribe = (n: number, due: boolean) => subscribeMembers(merchantId, planId, n, due);
    // Statistics taken while no call is unconfirmed (the partial index empty), as after a quiet night.
    const inFlight = await subscribe(300, false);
    await db.query('analyze billing.subscriptions; analyze billing.transactions');
    const due = await subscribe(600, true);
    // Then calls go out for other subscriptions, and one for a due subscription.
    await db.query(
      `insert into billing.transactions (id, merchant_id, member_id, subscription_id, kind, amount_minor, currency, status, occurred_at, created_at, updated_at)
       select gen_random_uuid(), $1, s.member_id, s.id, 'Charge', 1995, 'AUD', 'Processing', now(), now(), now()
         from jsonb_to_recordset($2::jsonb) as s(id uuid, member_id uuid)`,
      [merchantId, JSON.stringify([...inFlight, due[0]])],
    );
    const sql = numbered(DUE_SUBSCRIPTIONS_SQL);
    const params = [new Date().toISOString(), [], 1000];
    await db.query('begin; set local search_path = billing');
    try {
      const claimed = new Set((await db.query<{ id: string }>(sql, params)).rows.map((r) => r.id));
      expect(claimed.size).toBe(599);
      expect(claimed.has(due[0]!.id)).toBe(false);
      expect(due.slice(1).every((s) => claimed.has(s.id))).toBe(true);
      const [{ 'QUERY PLAN': [plan] }] = (await db.query(`explain (analyze, format json) ${sql}`, params)).rows;
      // A handful when the unconfirmed calls are read once; about 600 × 300 when they are
      // rescanned for each due subscription.
      expect(rowsRemoved(plan.Plan)).toBeLessThan(1_000);
    } finally {
      await db.query('rollback');
    }
  });
  it('reads the charges already tried by subscription, even in a plan made before a billing run made its charges', async () => {
    const { merchantId } = await seedSubscription();
    const [{ plan_id: planId }] = (await db.query<{ plan_id: string }>(`select plan_id from billing.subscriptions where merchant_id = $1`, [merchantId])).rows;
    const subs = await subscribeMembers(merchantId, planId, 1000, true);
    // Statistics taken before the run's charges exist; then a run charges them all, and one is retried.
    await db.query('analyze billing.transactions');
    const charged = await db.query<{ id: string }>(
      `insert into billing.transactions (id, merchant_id, member_id, subscription_id, kind, amount_minor, currency, status, period_start, occurred_at, created_at, updated_at)
       select gen_random_uuid(), $1, s.member_id, s.id, 'Charge', 1995, 'AUD', 'Failed', now(), now(), now(), now()
         from jsonb_to_recordset($2::jsonb) as s(id uuid, member_id uuid) returning id`,
      [merchantId, JSON.stringify(subs)],
    );
    const retried = await db.query<{ subscription_id: string }>(
      `insert into billing.transactions (id, merchant_id, member_id, subscription_id, kind, amount_minor, currency, status, original_transaction_id, occurred_at, created_at, updated_at)
       select gen_random_uuid(), merchant_id, member_id, subscription_id, 'Charge', 1995, 'AUD', 'Processing', id, now(), now(), now() from billing.transactions where id = $1
       returning subscription_id`,
      [charged.rows[0]!.id],
    );
    const chunk = [retried.rows[0]!.subscription_id, ...subs.map((s) => s.id).filter((id) => id !== retried.rows[0]!.subscription_id).slice(0, 9)];
    await db.query('begin; set local search_path = billing');
    try {
      const tried = (await db.query<{ subscription_id: string; manual: boolean }>(numbered(TRIED_CHARGES_SQL), [chunk])).rows;
      expect(tried.filter((r) => !r.manual).map((r) => r.subscription_id).sort()).toEqual([...chunk].sort());
      expect(tried.filter((r) => r.manual).map((r) => r.subscription_id)).toEqual([chunk[0]]);
      const [{ 'QUERY PLAN': [plan] }] = (await db.query(`explain (analyze, format json) ${numbered(TRIED_CHARGES_SQL)}`, [chunk])).rows;
      // Ten subscriptions' charges (and the one retry) on an index by subscription. Through an
      // index of every charge without an original, or the whole table, filtered by subscription:
      // all the others.
      expect(rowsRemoved(plan.Plan)).toBeLessThan(100);
    } finally {
      await db.query('rollback');
    }
  });
});
