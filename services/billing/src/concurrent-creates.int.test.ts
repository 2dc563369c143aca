import { randomBytes, randomUUID } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { migrate } from '@billing/service-runtime';
import { openBillingDatabase } from './app.js';
import { MIGRATIONS } from './migrations/index.js';
import { BillingConfig } from './config.js';
import { membersGrpc } from './members/members-grpc.js';
import { Merchant } from './merchants/merchant.js';
import { paymentMethodsGrpc } from './payment-methods/payment-methods-grpc.js';
import type { PaymentProviders } from './payment-provider/payment-providers.js';
import { plansGrpc } from './plans/plans-grpc.js';
import { productsGrpc } from './products/products-grpc.js';
import { questionsGrpc } from './questions/questions-grpc.js';
import { loadSubscriptions, saveBillingStates } from './billing-runs/billing-run-store.js';
import { findSubscription, subscriptionsGrpc } from './subscriptions/subscriptions-grpc.js';
import { SubscriptionStore } from './subscriptions/subscription-store.js';

// The billing gRPC handlers against a real Postgres database of their own: the uniqueness
// rules hold under concurrency because the database enforces them, not because of timing.

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `bp_test_billing_${randomBytes(5).toString('hex')}`;
let orm: MikroORM;

async function onServer(sql: string) {
  const client = new pg.Client({ connectionString: SERVER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  await onServer(`create database "${dbName}"`);
  const url = new URL(SERVER_URL);
  url.pathname = `/${dbName}`;
  orm = await openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url.toString(), DB_POOL_MAX: '25' }));
  await migrate(orm, 'billing', MIGRATIONS);
}, 60_000);

afterAll(async () => {
  await orm?.close();
  await onServer(`drop database if exists "${dbName}" with (force)`);
});

async function merchantWithPlan(isActive = true) {
  const merchant = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  await orm.em.fork().persistAndFlush(merchant);
  const product = await productsGrpc(orm).CreateProduct({ scope: { kind: 'merchantId', merchantId: merchant.id }, name: 'Membership' });
  const plan = await plansGrpc(orm).CreatePlan({ scope: { kind: 'merchantId', merchantId: merchant.id }, productId: product.id, name: 'Monthly', amountMinor: '1995', currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0, isActive });
  return { merchantId: merchant.id, planId: plan.id };
}

async function codeOf(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError');
}

const count = async (sql: string, params: unknown[]) => Number((await orm.em.getConnection().execute(sql, params))[0].n);

describe('members', () => {
  it('makes one member and one member.created of 20 concurrent creates with one email', async () => {
    const { merchantId } = await merchantWithPlan();
    const members = membersGrpc(orm);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => members.CreateMember({ scope: { kind: 'merchantId', merchantId }, email: i % 2 ? 'ADA@example.com' : 'ada@example.com', firstName: 'Ada', lastName: 'L' })));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.member.id)).size).toBe(1);
    expect(await count('select count(*) as n from billing.members where merchant_id = ?', [merchantId])).toBe(1);
    expect(await count(`select count(*) as n from billing.outbox where type = 'member.created' and merchant_id = ?`, [merchantId])).toBe(1);
  });

  it('answers merchant_not_found for a merchant that does not exist', async () => {
    expect((await codeOf(membersGrpc(orm).CreateMember({ scope: { kind: 'merchantId', merchantId: randomUUID() }, email: 'x@example.com', firstName: 'A', lastName: 'B' }))).code).toBe('merchant_not_found');
  });
});

describe('subscriptions', () => {
  it('commits exactly one of 20 concurrent creates; the others get subscription_exists with its id', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const { member } = await membersGrpc(orm).CreateMember({ scope: { kind: 'merchantId', merchantId }, email: 'race@example.com', firstName: 'R', lastName: 'C' });
    const subs = subscriptionsGrpc(orm);
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => subs.CreateSubscription({ scope: { kind: 'merchantId', merchantId }, memberId: member.id, planId })));
    const won = outcomes.filter((o) => o.status === 'fulfilled') as PromiseFulfilledResult<{ id: string }>[];
    const lost = outcomes.filter((o) => o.status === 'rejected') as PromiseRejectedResult[];
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(19);
    for (const l of lost) {
      expect(l.reason).toBeInstanceOf(DomainError);
      expect(l.reason.code).toBe('subscription_exists');
      expect(l.reason.extensions.existingSubscriptionId).toBe(won[0]!.value.id);
    }
    expect(await count(`select count(*) as n from billing.subscriptions where member_id = ?`, [member.id])).toBe(1);
    expect(await count(`select count(*) as n from billing.outbox where type = 'subscription.created' and data->>'memberId' = ?`, [member.id])).toBe(1);
  });

  it('answers a create repeating a caller-chosen id with the subscription it made, even when repeated concurrently; the id on another member is a conflict', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const scope = { kind: 'merchantId', merchantId } as const;
    const members = membersGrpc(orm);
    const { member } = await members.CreateMember({ scope, email: 'chosen@example.com', firstName: 'C', lastName: 'H' });
    const { member: other } = await members.CreateMember({ scope, email: 'other-chosen@example.com', firstName: 'O', lastName: 'C' });
    const subs = subscriptionsGrpc(orm);
    const id = randomUUID();
    const answers = await Promise.all(Array.from({ length: 10 }, () => subs.CreateSubscription({ scope, memberId: member.id, planId, id: id.toUpperCase() })));
    expect(new Set(answers.map((a) => a.id))).toEqual(new Set([id]));
    expect((await subs.CreateSubscription({ scope, memberId: member.id, planId, id })).id).toBe(id);
    expect(await count(`select count(*) as n from billing.subscriptions where member_id = ?`, [member.id])).toBe(1);
    expect(await count(`select count(*) as n from billing.outbox where type = 'subscription.created' and data->>'id' = ?`, [id])).toBe(1);
    expect((await codeOf(subs.CreateSubscription({ scope, memberId: other.id, planId, id }))).code).toBe('conflict');
    const elsewhere = await merchantWithPlan();
    const { member: stranger } = await members.CreateMember({ scope: { kind: 'merchantId', merchantId: elsewhere.merchantId }, email: 'chosen@example.com', firstName: 'C', lastName: 'H' });
    expect((await codeOf(subs.CreateSubscription({ scope: { kind: 'merchantId', merchantId: elsewhere.merchantId }, memberId: stranger.id, planId: elsewhere.planId, id }))).code).toBe('conflict');
    expect(await count(`select count(*) as n from billing.subscriptions where id = ?`, [id])).toBe(1);
  });

  it('refuses a second live subscription at the database even when the check is bypassed', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const { member } = await membersGrpc(orm).CreateMember({ scope: { kind: 'merchantId', merchantId }, email: 'direct@example.com', firstName: 'D', lastName: 'I' });
    const first = await subscriptionsGrpc(orm).CreateSubscription({ scope: { kind: 'merchantId', merchantId }, memberId: member.id, planId });
    const insert = `insert into billing.subscriptions (id, merchant_id, member_id, plan_id, status, current_period_start, current_period_end, billing_anchor, created_at, updated_at)
                    values (?, ?, ?, ?, ?, now(), now(), now(), now(), now())`;
    await expect(orm.em.getConnection().execute(insert, [randomUUID(), merchantId, member.id, planId, 'Paused'])).rejects.toThrow(/subscriptions_live_unique/);
    await subscriptionsGrpc(orm).CancelSubscription({ scope: { kind: 'merchantId', merchantId }, id: first.id, atPeriodEnd: false });
    await orm.em.getConnection().execute(insert, [randomUUID(), merchantId, member.id, planId, 'Active']);
  });

  it('decides each create of one batch on its own: refused ones answer their error and write nothing, the rest commit with their events', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const inactive = await merchantWithPlan(false);
    const other = await merchantWithPlan();
    const members = membersGrpc(orm);
    const scope = { kind: 'merchantId' as const, merchantId };
    const created = await Promise.all(Array.from({ length: 6 }, (_, i) => members.CreateMember({ scope, email: `batch${i}@example.com`, firstName: 'B', lastName: `${i}` })));
    const [a, b, c, d] = created.map((r) => r.member.id);
    const { member: outsider } = await members.CreateMember({ scope: { kind: 'merchantId', merchantId: other.merchantId }, email: 'outsider@example.com', firstName: 'O', lastName: 'U' });
    const subs = subscriptionsGrpc(orm);
    // All at once, so they share batches: two that commit among four refused for different reasons.
    const outcomes = await Promise.allSettled([
      subs.CreateSubscription({ scope, memberId: a!, planId }),
      subs.CreateSubscription({ scope, memberId: randomUUID(), planId }),
      subs.CreateSubscription({ scope, memberId: b!, planId: other.planId }),
      subs.CreateSubscription({ scope, memberId: outsider.id, planId }),
      subs.CreateSubscription({ scope: { kind: 'merchantId', merchantId: inactive.merchantId }, memberId: c!, planId: inactive.planId }),
      subs.CreateSubscription({ scope, memberId: d!, planId }),
    ]);
    const error = (o: PromiseSettledResult<unknown>) => (o.status === 'rejected' ? `${o.reason.code}: ${o.reason.message}` : 'ok');
    expect(outcomes.map(error)).toEqual(['ok', 'not_found: Member not found.', 'not_found: Plan not found.', 'not_found: Member not found.', 'not_found: Member not found.', 'ok']);
    for (const [i, memberId] of [[0, a], [5, d]] as const) {
      const answer = (outcomes[i] as PromiseFulfilledResult<{ id: string; memberId: string; status: string }>).value;
      expect(answer).toMatchObject({ memberId, status: 'Active' });
      expect(await count('select count(*) as n from billing.subscriptions where id = ? and member_id = ?', [answer.id, memberId])).toBe(1);
      expect(await count(`select count(*) as n from billing.outbox where type = 'subscription.created' and data->>'id' = ?`, [answer.id])).toBe(1);
    }
    expect(await count('select count(*) as n from billing.subscriptions where member_id = any(?::uuid[])', [`{${[b, c, outsider.id].join(',')}}`])).toBe(0);
  });

  it('refuses an inactive plan as unprocessable', async () => {
    const { merchantId, planId } = await merchantWithPlan(false);
    const { member } = await membersGrpc(orm).CreateMember({ scope: { kind: 'merchantId', merchantId }, email: 'late@example.com', firstName: 'L', lastName: 'A' });
    expect((await codeOf(subscriptionsGrpc(orm).CreateSubscription({ scope: { kind: 'merchantId', merchantId }, memberId: member.id, planId }))).code).toBe('unprocessable');
  });
});

describe('transitions', () => {
  it('pauses a subscription once of 20 concurrent pauses (the others: invalid_transition), with one subscription.paused; other subscriptions in the same batches change too', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const scope = { kind: 'merchantId' as const, merchantId };
    const subs = subscriptionsGrpc(orm);
    const members = await Promise.all(['p1', 'p2', 'p3'].map((n) => membersGrpc(orm).CreateMember({ scope, email: `${n}@example.com`, firstName: 'P', lastName: n })));
    const [target, ...others] = await Promise.all(members.map(({ member }) => subs.CreateSubscription({ scope, memberId: member.id, planId })));
    const outcomes = await Promise.allSettled([
      ...Array.from({ length: 20 }, () => subs.PauseSubscription({ scope, id: target!.id })),
      ...others.map((o) => subs.PauseSubscription({ scope, id: o.id })),
    ]);
    const won = outcomes.slice(0, 20).filter((o) => o.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const o of outcomes.slice(0, 20)) if (o.status === 'rejected') expect((o.reason as DomainError).code).toBe('invalid_transition');
    expect(outcomes.slice(20).map((o) => o.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(await count(`select count(*) as n from billing.outbox where type = 'subscription.paused' and data->>'id' = ?`, [target!.id])).toBe(1);
    expect(await count(`select count(*) as n from billing.subscriptions where merchant_id = ? and status = 'Paused'`, [merchantId])).toBe(3);
  });

  it('answers not_found for another merchant\'s subscription without touching it or its batch neighbours', async () => {
    const a = await merchantWithPlan();
    const b = await merchantWithPlan();
    const subs = subscriptionsGrpc(orm);
    const scopeA = { kind: 'merchantId' as const, merchantId: a.merchantId };
    const { member } = await membersGrpc(orm).CreateMember({ scope: scopeA, email: 'x1@example.com', firstName: 'X', lastName: 'Y' });
    const { member: other } = await membersGrpc(orm).CreateMember({ scope: scopeA, email: 'x2@example.com', firstName: 'X', lastName: 'Z' });
    const sub = await subs.CreateSubscription({ scope: scopeA, memberId: member.id, planId: a.planId });
    const neighbour = await subs.CreateSubscription({ scope: scopeA, memberId: other.id, planId: a.planId });
    const [foreign, own] = await Promise.allSettled([
      subs.CancelSubscription({ scope: { kind: 'merchantId', merchantId: b.merchantId }, id: sub.id, atPeriodEnd: false }),
      subs.CancelSubscription({ scope: scopeA, id: neighbour.id, atPeriodEnd: false }),
    ]);
    expect(foreign.status === 'rejected' && (foreign.reason as DomainError).code).toBe('not_found');
    expect(own.status).toBe('fulfilled');
    expect(await count(`select count(*) as n from billing.subscriptions where id = ? and status = 'Active'`, [sub.id])).toBe(1);
  });
});

describe('transition writes', () => {
  const outboxOf = async (id: string) =>
    (await orm.em.getConnection().execute(`select type, data from billing.outbox where data->>'id' = ? order by seq`, [id])) as { type: string; data: Record<string, unknown> }[];
  const rowOf = async (id: string) => (await findSubscription(orm.em.fork(), { kind: 'platform' }, id)).toMessage();

  it('stores what the aggregate decided: the row read back equals each answer, each event carries it, and a no-op writes nothing', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const scope = { kind: 'merchantId' as const, merchantId };
    const subs = subscriptionsGrpc(orm);
    const { member } = await membersGrpc(orm).CreateMember({ scope, email: 'rows@example.com', firstName: 'R', lastName: 'W' });
    const sub = await subs.CreateSubscription({ scope, memberId: member.id, planId });
    const resumeAt = new Date(Date.now() + 86_400_000).toISOString();
    const paused = await subs.PauseSubscription({ scope, id: sub.id.toUpperCase(), resumeAt });
    expect(paused).toMatchObject({ status: 'Paused', resumeAt });
    expect(await rowOf(sub.id)).toEqual(paused);
    // Paused past its due date: resuming starts a new period now.
    await orm.em.getConnection().execute(`update billing.subscriptions set next_billing_at = now() - interval '1 day' where id = ?`, [sub.id]);
    const resumed = await subs.ResumeSubscription({ scope, id: sub.id });
    expect(resumed).toMatchObject({ status: 'Active', pausedAt: undefined, resumeAt: undefined, nextBillingAt: resumed.currentPeriodStart });
    expect(await rowOf(sub.id)).toEqual(resumed);
    const ending = await subs.CancelSubscription({ scope, id: sub.id, atPeriodEnd: true });
    expect(ending).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true });
    expect(await rowOf(sub.id)).toEqual(ending);
    expect(await subs.CancelSubscription({ scope, id: sub.id, atPeriodEnd: true })).toEqual(ending);
    expect(await rowOf(sub.id)).toEqual(ending);
    const cancelled = await subs.CancelSubscription({ scope, id: sub.id, atPeriodEnd: false });
    expect(await rowOf(sub.id)).toEqual(cancelled);
    const view = (m: typeof paused) => ({ ...m, paymentMethodId: m.paymentMethodId ?? null, nextBillingAt: m.nextBillingAt ?? null, pausedAt: m.pausedAt ?? null, resumeAt: m.resumeAt ?? null, cancelledAt: m.cancelledAt ?? null });
    expect(await outboxOf(sub.id)).toEqual([
      { type: 'subscription.created', data: view(sub) },
      { type: 'subscription.paused', data: view(paused) },
      { type: 'subscription.resumed', data: view(resumed) },
      { type: 'subscription.cancelled', data: view(cancelled) },
    ]);
  });

  it('answers not_found for a malformed or missing id and invalid_transition for a refused one, while their batch neighbours commit', async () => {
    const { merchantId, planId } = await merchantWithPlan();
    const scope = { kind: 'merchantId' as const, merchantId };
    const subs = subscriptionsGrpc(orm);
    const { member } = await membersGrpc(orm).CreateMember({ scope, email: 'mixed@example.com', firstName: 'M', lastName: 'X' });
    const { member: other } = await membersGrpc(orm).CreateMember({ scope, email: 'mixed2@example.com', firstName: 'M', lastName: 'Y' });
    const active = await subs.CreateSubscription({ scope, memberId: member.id, planId });
    const toPause = await subs.CreateSubscription({ scope, memberId: other.id, planId });
    const outcomes = await Promise.allSettled([
      subs.PauseSubscription({ scope, id: 'not-a-uuid' }),
      subs.PauseSubscription({ scope, id: randomUUID() }),
      subs.ResumeSubscription({ scope, id: active.id }),
      subs.PauseSubscription({ scope, id: toPause.id }),
    ]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as DomainError).code : 'ok'))).toEqual(['not_found', 'not_found', 'invalid_transition', 'ok']);
    expect(await rowOf(active.id)).toEqual(active);
    expect((await rowOf(toPause.id)).status).toBe('Paused');
    expect((await outboxOf(active.id)).map((e) => e.type)).toEqual(['subscription.created']);
  });
});

describe('transitions racing other writers', () => {
  const rowOf = async (id: string) => (await findSubscription(orm.em.fork(), { kind: 'platform' }, id)).toMessage();
  // A connection of its own, as another writer's would be.
  let db: pg.Client;
  beforeAll(async () => {
    const url = new URL(SERVER_URL);
    url.pathname = `/${dbName}`;
    db = new pg.Client({ connectionString: url.toString() });
    await db.connect();
  });
  afterAll(() => db?.end());
  const eventsOf = async (id: string, type: string) => count(`select count(*) as n from billing.outbox where type = ? and data->>'id' = ?`, [type, id]);

  async function subscriptionsOf(n: number) {
    const { merchantId, planId } = await merchantWithPlan();
    const scope = { kind: 'merchantId' as const, merchantId };
    const members = await Promise.all(Array.from({ length: n }, (_, i) => membersGrpc(orm).CreateMember({ scope, email: `race${i}@example.com`, firstName: 'R', lastName: `${i}` })));
    const subs = await Promise.all(members.map(({ member }) => subscriptionsGrpc(orm).CreateSubscription({ scope, memberId: member.id, planId })));
    return { scope, merchantId, ids: subs.map((s) => s.id) };
  }

  /**
   * Resolves once a statement of another connection waits for a row lock, answering its text.
   * pg_stat_activity copies a backend's query text before it reads the backend's wait event, so
   * one sighting can pair the statement before with the wait of the next one (a CI run saw the
   * transition's read "waiting"). A backend seen waiting twice over is still in the statement that
   * waits (nothing releases the lock meanwhile), and the second sighting's text is that statement.
   */
  async function lockWaiter(): Promise<string> {
    let seen: number | undefined;
    for (let i = 0; i < 500; i++) {
      const { rows } = await db.query<{ pid: number; query: string }>(`select pid, query from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
      const again = rows.find((r) => r.pid === seen);
      if (again) return again.query;
      seen = rows[0]?.pid;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('no statement waited for a lock');
  }

  it('decides again when a billing run changes the row between its read and its write: the run\'s change stays, the pause applies to the new row, with one subscription.paused', async () => {
    const { scope, ids: [id] } = await subscriptionsOf(1);
    let paused: Promise<Awaited<ReturnType<ReturnType<typeof subscriptionsGrpc>['PauseSubscription']>>> | undefined;
    let waiting = '';
    const failedAt = new Date(Date.now() + 1000);
    await orm.em.fork().transactional(async (em) => {
      const [sub] = await loadSubscriptions(em, [id!], { lock: true });
      // The pause reads the row as it was (reads take no lock) and then waits for the run's lock with its write.
      paused = subscriptionsGrpc(orm).PauseSubscription({ scope, id: id! });
      waiting = await lockWaiter();
      sub!.recordFailedCharge({ retryOffsetsDays: [3], terminalAction: 'Cancel' }, failedAt);
      await saveBillingStates(em, [sub!]);
    });
    expect(waiting).toContain('update subscriptions');
    const answer = await paused!;
    expect(answer).toMatchObject({ status: 'Paused', nextBillingAt: new Date(failedAt.getTime() + 3 * 86_400_000).toISOString() });
    expect(await rowOf(id!)).toEqual(answer);
    const { rows: [row] } = await db.query<{ dunning_started_at: Date }>(`select dunning_started_at from billing.subscriptions where id = $1`, [id]);
    expect(row!.dunning_started_at).toEqual(failedAt);
    expect(await eventsOf(id!, 'subscription.paused')).toBe(1);
  });

  it('loses none of a concurrent writer\'s updates (even ones that leave updated_at alone): pause/resume cycles racing them, with one event per transition', async () => {
    const { scope, ids } = await subscriptionsOf(3);
    // Due in the future, so a resume keeps the period the writer moves.
    await db.query(`update billing.subscriptions set next_billing_at = now() + interval '400 days' where id = any($1::uuid[])`, [ids]);
    const ends = async () => (await db.query<{ current_period_end: Date }>(`select current_period_end from billing.subscriptions where id = any($1::uuid[]) order by id`, [ids])).rows.map((r) => r.current_period_end.getTime());
    const before = await ends();
    const subs = subscriptionsGrpc(orm);
    const BUMPS = 40;
    const CYCLES = 8;
    const writer = (async () => {
      // Locking its rows in id order first, as every writer of subscriptions does (a bare
      // multi-row UPDATE locks them in scan order and could deadlock with the transitions).
      const bump = `update billing.subscriptions set current_period_end = current_period_end + interval '1 day'
                     where id in (select id from billing.subscriptions where id = any($1::uuid[]) order by id for update)`;
      for (let i = 0; i < BUMPS; i++) await db.query(bump, [ids]);
    })();
    await Promise.all([
      writer,
      ...ids.map(async (id) => {
        for (let i = 0; i < CYCLES; i++) {
          await subs.PauseSubscription({ scope, id });
          await subs.ResumeSubscription({ scope, id });
        }
      }),
    ]);
    expect(await ends()).toEqual(before.map((t) => t + BUMPS * 86_400_000));
    for (const id of ids) {
      expect(await eventsOf(id, 'subscription.paused')).toBe(CYCLES);
      expect(await eventsOf(id, 'subscription.resumed')).toBe(CYCLES);
      expect((await rowOf(id)).status).toBe('Active');
    }
  });

  it('decides under the row lock as its fallback with the same answers: of 20 concurrent pauses one wins, with one event, and its batch neighbours commit', async () => {
    const { merchantId, ids: [target, ...others] } = await subscriptionsOf(3);
    const store = new SubscriptionStore(orm, { optimisticAttempts: 0 });
    const scope = { kind: 'merchant' as const, merchantId };
    const pause = (id: string) => store.transition({ scope, id, change: (sub) => sub.pause(null) });
    const outcomes = await Promise.allSettled([...Array.from({ length: 20 }, () => pause(target!)), ...others.map(pause), pause(randomUUID())]);
    const codes = outcomes.map((o) => (o.status === 'rejected' ? (o.reason as DomainError).code : 'ok'));
    expect(codes.slice(0, 20).filter((c) => c === 'ok')).toHaveLength(1);
    expect(codes.slice(0, 20).filter((c) => c !== 'ok')).toEqual(Array(19).fill('invalid_transition'));
    expect(codes.slice(20)).toEqual(['ok', 'ok', 'not_found']);
    expect(await eventsOf(target!, 'subscription.paused')).toBe(1);
    expect(await count(`select count(*) as n from billing.subscriptions where merchant_id = ? and status = 'Paused'`, [merchantId])).toBe(3);
  });
});

describe('payment methods', () => {
  it('gives 10 concurrent adds for one member ranks 1..10, and adds for other members their own rank 1', async () => {
    const { merchantId } = await merchantWithPlan();
    const scope = { kind: 'merchantId' as const, merchantId };
    const [{ member }, { member: second }] = await Promise.all(['r1', 'r2'].map((n) => membersGrpc(orm).CreateMember({ scope, email: `${n}@example.com`, firstName: 'R', lastName: n })));
    const methods = paymentMethodsGrpc(orm, {} as PaymentProviders);
    const card = { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040 };
    const added = await Promise.all([
      ...Array.from({ length: 10 }, () => methods.AddPaymentMethod({ scope, memberId: member!.id, ...card })),
      methods.AddPaymentMethod({ scope, memberId: second!.id, ...card }),
    ]);
    expect(added.slice(0, 10).map((a) => a.paymentMethod!.rank).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(added[10]!.paymentMethod!.rank).toBe(1);
    expect(await count(`select count(*) as n from billing.outbox where type = 'payment_method.added' and merchant_id = ?`, [merchantId])).toBe(11);
  });
});

describe('questions', () => {
  it('gives 10 concurrent creates without an order the orders 1..10 after the last one', async () => {
    const { merchantId } = await merchantWithPlan();
    const scope = { kind: 'merchantId' as const, merchantId };
    const product = await productsGrpc(orm).CreateProduct({ scope, name: 'Quiz' });
    const questions = questionsGrpc(orm);
    const created = await Promise.all(Array.from({ length: 10 }, (_, i) => questions.CreateQuestion({ scope, productId: product.id, text: `Q${i}?`, kind: 'Text', required: false, optionLabels: [] })));
    expect(created.map((q) => q.order).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });
});
