import { randomUUID } from 'node:crypto';
import { DriverException } from '@mikro-orm/postgresql';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import type { CallScope } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { BillingConfig } from '../config.js';
import { platformFee } from '../fees/platform-fee.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import { applyCallOutcomes } from '../billing-runs/billing-run.js';
import { chargingNow } from '../subscriptions/subscription.js';
import { Transaction } from './transaction.js';
import { TransactionReservations, type Reservation } from './transaction-reservations.js';

// The reservations of refunds and retries (their hand-written SQL, optimistic or under locks) against a
// real database: the rules each request meets alone, in batches and across concurrent batches.

const { orm, rows, url } = useMigratedDatabase({
  open: (url) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url, DB_POOL_MAX: '25' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

const LEASE_MS = 60_000;
/** Reservations made as if every merchant environment had a payment provider. */
const ANY_PROVIDER = { configuredFor: () => true };
const PERIOD = '2030-01-01T00:00:00.000Z';

/** A merchant (with fee terms of its own) and a member with a payment method; `scope` is its call scope. */
async function seedMerchant() {
  const [merchantId, productId, memberId, paymentMethodId] = Array.from({ length: 4 }, () => randomUUID());
  await rows(
    `insert into billing.merchants (id, name, contact_email, provider_environment, platform_fee_percent, platform_fee_fixed_minor, created_at, updated_at)
     values (?, 'M', 'm@example.com', 'Production', 2.75, 45, now(), now())`,
    [merchantId],
  );
  await rows(`insert into billing.products (id, merchant_id, name, created_at, updated_at) values (?, ?, 'P', now(), now())`, [productId, merchantId]);
  await rows(`insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at) values (?, ?, 'a@example.com', 'A', 'B', now(), now())`, [memberId, merchantId]);
  await rows(
    `insert into billing.payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, rank, created_at, updated_at) values (?, ?, ?, 'Card', 'Visa', '4242', 12, 2099, 1, now(), now())`,
    [paymentMethodId, merchantId, memberId],
  );
  return { merchantId, productId, memberId, paymentMethodId, scope: { kind: 'merchant', merchantId } as CallScope };
}

type Owner = Awaited<ReturnType<typeof seedMerchant>>;

/** A subscription of the member to a plan of its own, collecting `duePeriod` (PastDue: as its dunning period). */
async function seedSubscription(o: Owner, status: 'Active' | 'PastDue' | 'Cancelled' | 'Paused' = 'PastDue', duePeriod = PERIOD, paymentMethodId: string | null = o.paymentMethodId): Promise<string> {
  const [id, planId] = [randomUUID(), randomUUID()];
  await rows(`insert into billing.plans (id, merchant_id, product_id, name, amount_minor, currency, billing_interval, created_at, updated_at) values (?, ?, ?, 'Monthly', 1995, 'AUD', 'Month', now(), now())`, [planId, o.merchantId, o.productId]);
  await rows(
    `insert into billing.subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, status, current_period_start, current_period_end, next_billing_at, billing_anchor,
                                        dunning_period_start, dunning_started_at, retry_count, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, '2029-12-01T00:00:00Z', ?, ?, '2029-12-01T00:00:00Z', ?, ?, 0, now(), now())`,
    [id, o.merchantId, o.memberId, planId, paymentMethodId, status, duePeriod, duePeriod, status === 'PastDue' ? duePeriod : null, status === 'PastDue' ? duePeriod : null],
  );
  return id;
}

/** A charge of `amountMinor` with `refundedMinor` refunded, of the subscription's `PERIOD` when it has one. */
async function seedCharge(o: Owner, c: { status: 'Settled' | 'Failed' | 'Processing'; amountMinor?: number; refundedMinor?: number; subscriptionId?: string; attempt?: number; paymentMethodId?: string }): Promise<string> {
  const id = randomUUID();
  await rows(
    `insert into billing.transactions (id, merchant_id, member_id, subscription_id, payment_method_id, kind, amount_minor, currency, status, failure_reason, attempt,
                                       period_start, fee_minor, refunded_minor, provider_ref, occurred_at, settled_at, created_at, updated_at)
     values (?, ?, ?, ?, ?, 'Charge', ?, 'AUD', ?, ?, ?, ?, 0, ?, ?, now(), null, now(), now())`,
    [
      id, o.merchantId, o.memberId, c.subscriptionId ?? null, c.paymentMethodId ?? o.paymentMethodId, c.amountMinor ?? 9950, c.status, c.status === 'Failed' ? 'declined' : null, c.attempt ?? 1,
      c.subscriptionId ? PERIOD : null, c.refundedMinor ?? 0, c.status === 'Processing' ? null : `ch_${id}`,
    ],
  );
  return id;
}

const refundedOf = async (id: string) => Number((await rows<{ refunded_minor: string }>(`select refunded_minor from billing.transactions where id = ?`, [id]))[0]!.refunded_minor);
const refundsOf = (id: string) => rows<{ id: string; amount_minor: string; status: string; reason: string | null }>(`select id, amount_minor, status, reason from billing.transactions where original_transaction_id = ? order by amount_minor`, [id]);

/** Each promise's value, or its error. */
const settle = <T,>(ps: Promise<T>[]) => Promise.all(ps.map((p) => p.then((value) => ({ value }), (error: unknown) => ({ error }))));

const domainError = (code: string, message: string) => ({ error: new DomainError(code as never, message) });

/** A reservation as stored: the row read by the ORM is the entity answered. */
async function expectStored(r: Reservation): Promise<void> {
  const stored = await orm().em.fork().findOneOrFail(Transaction, { id: r.t.id });
  expect({ ...stored }).toEqual({ ...r.t });
}

describe('TransactionReservations.refund', () => {
  // Optimistic (a compare-and-swap on the charge's refunded amount, tried again when it loses),
  // under the charge's row lock from the start, and under it after one lost attempt.
  it.each([
    ['optimistically', undefined],
    ['under the row lock', 0],
    ['under the row lock after one lost attempt', 1],
  ])('never lets concurrent refunds of one charge exceed it (%s): four of 30.00 with 89.50 left, from four replicas at once, reserve exactly two', async (_mode, optimisticAttempts) => {
    const o = await seedMerchant();
    const charge = await seedCharge(o, { status: 'Settled', amountMinor: 9950, refundedMinor: 1000 });
    const replicas = Array.from({ length: 4 }, () => new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS, { optimisticAttempts }));
    const results = await settle(replicas.map((r) => r.refund({ scope: o.scope, id: charge, amountMinor: 3000, reason: null, startedAt: new Date() })));
    const ok = results.flatMap((r) => ('value' in r ? [r.value] : []));
    expect(ok).toHaveLength(2);
    expect(results.filter((r) => 'error' in r).map((r) => (r as { error: DomainError }).error.message)).toEqual(Array(2).fill('The refund exceeds the refundable amount of the charge (29.50 AUD left).'));
    expect(await refundedOf(charge)).toBe(7000);
    expect((await refundsOf(charge)).map((r) => [Number(r.amount_minor), r.status])).toEqual([[3000, 'Processing'], [3000, 'Processing']]);
    for (const r of ok) await expectStored(r);
  });

  it('decides the refunds of one charge sent together one after the other, as if sent in turn: never beyond the charge', async () => {
    const o = await seedMerchant();
    const charge = await seedCharge(o, { status: 'Settled', amountMinor: 9950, refundedMinor: 1000 });
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const results = await settle([reservations.refund({ scope: o.scope, id: charge.toUpperCase(), amountMinor: null, reason: 'all', startedAt: new Date() }), reservations.refund({ scope: o.scope, id: charge, amountMinor: 1, reason: null, startedAt: new Date() })]);
    // Two batches (one charge per batch), racing for the row lock: the rest of the charge and then
    // nothing left, or 0.01 and then the rest of the charge.
    const amounts = results.map((r) => ('value' in r ? r.value.t.amountMinor : r.error));
    expect([[8950, new DomainError('invalid_transition', 'The charge has been refunded in full.')], [8949, 1]]).toContainEqual(amounts);
    expect(await refundedOf(charge)).toBe(9950);
  });

  it('refuses a refund beside one reserved by a process that stopped before this one started (billing killed mid-call), naming it, while its lease still runs', async () => {
    const o = await seedMerchant();
    const charge = await seedCharge(o, { status: 'Settled', amountMinor: 9950 });
    // The process that died: it reserved a refund and never recorded its call's answer.
    const dead = await new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS).refund({ scope: o.scope, id: charge, amountMinor: 3000, reason: null, startedAt: new Date() });
    // Its replacement, started since; the caller, answered 503, tries again with a new key.
    await new Promise((r) => setTimeout(r, 5));
    const restarted = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS, { processStartedAt: new Date() });
    const [again] = await settle([restarted.refund({ scope: o.scope, id: charge, amountMinor: 3000, reason: null, startedAt: new Date() })]);
    expect('error' in again! && again.error).toMatchObject({ code: 'conflict', extensions: { transactionId: dead.t.id } });
    expect(await refundedOf(charge)).toBe(3000);
    expect((await refundsOf(charge)).map((r) => r.id)).toEqual([dead.t.id]);
  });

  it("refuses in a batch another merchant's charge, a charge not Settled, a malformed id and an excess alone, and reserves the others with what their calls need", async () => {
    const o = await seedMerchant();
    const other = await seedMerchant();
    const [a, b] = [await seedCharge(o, { status: 'Settled', amountMinor: 5000 }), await seedCharge(o, { status: 'Settled', amountMinor: 7000, refundedMinor: 2000 })];
    const theirs = await seedCharge(other, { status: 'Settled' });
    const failed = await seedCharge(o, { status: 'Failed' });
    const processing = await seedCharge(o, { status: 'Processing' });
    const small = await seedCharge(o, { status: 'Settled', amountMinor: 100 });
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const before = Date.now();
    const results = await settle([
      reservations.refund({ scope: o.scope, id: a, amountMinor: 1234, reason: 'partial', startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: theirs, amountMinor: null, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: failed, amountMinor: null, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: processing, amountMinor: null, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: 'not-a-uuid', amountMinor: null, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: small, amountMinor: 101, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: { kind: 'platform' }, id: b, amountMinor: null, reason: null, startedAt: new Date() }),
    ]);
    expect(results.slice(1, 6)).toEqual([
      domainError('not_found', 'Transaction not found.'),
      domainError('invalid_transition', 'Only a Settled charge can be refunded; this one is Failed.'),
      domainError('invalid_transition', 'Only a Settled charge can be refunded; this one is Processing.'),
      domainError('not_found', 'Transaction not found.'),
      domainError('invalid_transition', 'The refund exceeds the refundable amount of the charge (1.00 AUD left).'),
    ]);
    const [ra, rb] = [results[0]!, results[6]!].map((r) => (r as { value: Reservation }).value);
    expect(ra!.t).toMatchObject({ kind: 'Refund', status: 'Processing', amountMinor: 1234, originalTransactionId: a, reason: 'partial', merchantId: o.merchantId, memberId: o.memberId, paymentMethodId: o.paymentMethodId });
    expect(rb!.t).toMatchObject({ amountMinor: 5000, originalTransactionId: b, reason: null });
    expect(ra!.t.claimedUntil!.getTime()).toBeGreaterThanOrEqual(before + LEASE_MS);
    expect(ra!.merchant).toEqual({ providerEnvironment: 'Production' });
    expect(ra!.original).toEqual({ id: a, providerRef: `ch_${a}` });
    for (const r of [ra!, rb!]) await expectStored(r);
    expect([await refundedOf(a), await refundedOf(b)]).toEqual([1234, 7000]);
    for (const id of [theirs, failed, processing, small]) {
      expect(await refundedOf(id)).toBe(0);
      expect(await refundsOf(id)).toEqual([]);
    }
  });

  it('fails only the request whose write the database refuses (text it cannot store) and commits the rest of its batch', async () => {
    const o = await seedMerchant();
    const [a, b] = [await seedCharge(o, { status: 'Settled' }), await seedCharge(o, { status: 'Settled' })];
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const [good, bad] = await settle([reservations.refund({ scope: o.scope, id: a, amountMinor: 10, reason: 'fine', startedAt: new Date() }), reservations.refund({ scope: o.scope, id: b, amountMinor: 10, reason: 'nul \u0000', startedAt: new Date() })]);
    expect('value' in good!).toBe(true);
    expect((bad as { error: unknown }).error).toBeInstanceOf(DriverException);
    expect([await refundedOf(a), await refundedOf(b)]).toEqual([10, 0]);
    expect((await refundsOf(a)).map((r) => r.reason)).toEqual(['fine']);
    expect(await refundsOf(b)).toEqual([]);
  });
});

describe('TransactionReservations.retry', () => {
  it('retries a Failed charge with attempt + 1 at its merchant fee, claims its subscription, and refuses a second retry of it', async () => {
    const o = await seedMerchant();
    const sub = await seedSubscription(o);
    const failed = await seedCharge(o, { status: 'Failed', amountMinor: 1995, subscriptionId: sub, attempt: 2 });
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const r = await reservations.retry({ scope: o.scope, id: failed });
    const merchant = await orm().em.fork().findOneOrFail(Merchant, { id: o.merchantId });
    expect(r.t).toMatchObject({ kind: 'Charge', status: 'Processing', attempt: 3, originalTransactionId: failed, subscriptionId: sub, paymentMethodId: o.paymentMethodId, amountMinor: 1995, periodStart: new Date(PERIOD) });
    expect(r.t.feeMinor).toBe(platformFee(1995, 'AUD', merchant.feeTerms()));
    expect(r.t.feeMinor).toBe(100);
    expect(r.merchant).toEqual({ providerEnvironment: 'Production' });
    await expectStored(r);
    const [{ claimed_until }] = await rows<{ claimed_until: Date | string }>(`select claimed_until from billing.subscriptions where id = ?`, [sub]);
    expect(new Date(claimed_until).getTime()).toBe(r.t.claimedUntil!.getTime());

    // Once the claim has passed (its provider call recorded), the same charge is still not retried twice.
    await rows(`update billing.subscriptions set claimed_until = null where id = ?`, [sub]);
    await expect(reservations.retry({ scope: o.scope, id: failed })).rejects.toEqual(new DomainError('invalid_transition', 'This charge has already been retried; retry the latest attempt.'));
  });

  it.each([
    ['optimistically', undefined],
    ['under the row locks', 0],
  ])('retries only the latest attempt of a period: an earlier one a billing run has tried again is refused, not numbered again (%s)', async (_mode, optimisticAttempts) => {
    const o = await seedMerchant();
    const sub = await seedSubscription(o);
    const first = await seedCharge(o, { status: 'Failed', subscriptionId: sub, attempt: 1 });
    const second = await seedCharge(o, { status: 'Failed', subscriptionId: sub, attempt: 2 });
    // Another subscription's later attempt of the same period start supersedes nothing here.
    const other = await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o), attempt: 1 });
    await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o), attempt: 2 });
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS, { optimisticAttempts });
    await expect(reservations.retry({ scope: o.scope, id: first })).rejects.toEqual(new DomainError('invalid_transition', 'This charge has already been retried; retry the latest attempt.'));
    expect((await reservations.retry({ scope: o.scope, id: second })).t).toMatchObject({ attempt: 3, originalTransactionId: second });
    expect((await reservations.retry({ scope: o.scope, id: other })).t).toMatchObject({ attempt: 2, originalTransactionId: other });
  });

  // Optimistically and under the rows' locks: both read the member's methods as they are now.
  it.each([
    ['optimistically', undefined],
    ['under the row locks', 0],
  ])('charges the subscription’s own method, else the member’s first-ranked one, not yet tried by the retry (not the failed charge’s), those that failed the period last, and refuses a member with none (%s)', async (_, optimisticAttempts) => {
    const o = await seedMerchant();
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS, { optimisticAttempts });
    const promoted = randomUUID();
    await rows(`update billing.payment_methods set rank = 2 where id = ?`, [o.paymentMethodId]);
    await rows(
      `insert into billing.payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, rank, created_at, updated_at) values (?, ?, ?, 'Card', 'Visa', '4444', 12, 2099, 1, now(), now())`,
      [promoted, o.merchantId, o.memberId],
    );
    // Subscriptions that name no payment method: the member's methods in rank order.
    const unnamed = () => seedSubscription(o, 'PastDue', PERIOD, null);
    const r = await reservations.retry({ scope: o.scope, id: await seedCharge(o, { status: 'Failed', subscriptionId: await unnamed() }) });
    expect(r.t.paymentMethodId).toBe(promoted);
    expect(r.method).toMatchObject({ id: promoted, last4: '4444', rank: 1 });
    await expectStored(r);
    const fallback = await reservations.retry({ scope: o.scope, id: await seedCharge(o, { status: 'Failed', subscriptionId: await unnamed() }), tried: [promoted] });
    expect(fallback.t.paymentMethodId).toBe(o.paymentMethodId);
    // One that names a method: that one first, then the others by rank.
    const onPromoted = { status: 'Failed', paymentMethodId: promoted } as const;
    const named = await reservations.retry({ scope: o.scope, id: await seedCharge(o, { ...onPromoted, subscriptionId: await seedSubscription(o) }) });
    expect(named.t.paymentMethodId).toBe(o.paymentMethodId);
    const namedFallback = await reservations.retry({ scope: o.scope, id: await seedCharge(o, { ...onPromoted, subscriptionId: await seedSubscription(o) }), tried: [o.paymentMethodId] });
    expect(namedFallback.t.paymentMethodId).toBe(promoted);
    // A method that failed the period (the named one, here) comes after the others.
    const namedFailed = await reservations.retry({ scope: o.scope, id: await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o) }) });
    expect(namedFailed.t.paymentMethodId).toBe(promoted);

    const exhausted = await seedCharge(o, { status: 'Failed', subscriptionId: await unnamed() });
    await expect(reservations.retry({ scope: o.scope, id: exhausted, tried: [promoted, o.paymentMethodId] })).rejects.toMatchObject({ code: 'conflict' });
    const none = await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o) });
    await rows(`delete from billing.payment_methods where member_id = ?`, [o.memberId]);
    await expect(reservations.retry({ scope: o.scope, id: none })).rejects.toEqual(
      new DomainError('conflict', 'The member has no payment method to charge; nothing was charged. Add one, then retry.'),
    );
    expect(await rows(`select id from billing.transactions where original_transaction_id in (?, ?)`, [exhausted, none])).toEqual([]);
  });

  it('refuses, each alone in one batch, a collected period, a subscription neither Active nor PastDue, a charge not Failed, a refund, a subscription claimed, and another merchant’s charge', async () => {
    const o = await seedMerchant();
    const other = await seedMerchant();
    const collected = await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o, 'PastDue', '2030-02-01T00:00:00.000Z') });
    const cancelled = await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o, 'Cancelled') });
    const paused = await seedCharge(o, { status: 'Failed', subscriptionId: await seedSubscription(o, 'Paused') });
    const settled = await seedCharge(o, { status: 'Settled', subscriptionId: await seedSubscription(o) });
    const claimedSub = await seedSubscription(o, 'Active');
    await rows(`update billing.subscriptions set claimed_until = now() + interval '1 minute' where id = ?`, [claimedSub]);
    const claimed = await seedCharge(o, { status: 'Failed', subscriptionId: claimedSub });
    const theirs = await seedCharge(other, { status: 'Failed', subscriptionId: await seedSubscription(other) });
    // Two failed charges of one subscription's attempt (its own method, then the fallback): the
    // first claims the subscription, which refuses the second.
    const shared = await seedSubscription(o);
    const fallback = randomUUID();
    await rows(
      `insert into billing.payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, rank, created_at, updated_at) values (?, ?, ?, 'Card', 'Visa', '1111', 12, 2099, 2, now(), now())`,
      [fallback, o.merchantId, o.memberId],
    );
    const [first, second] = [await seedCharge(o, { status: 'Failed', subscriptionId: shared }), await seedCharge(o, { status: 'Failed', subscriptionId: shared, paymentMethodId: fallback })];
    const refund = randomUUID();
    await rows(
      `insert into billing.transactions (id, merchant_id, member_id, kind, amount_minor, currency, status, attempt, original_transaction_id, fee_minor, refunded_minor, occurred_at, created_at, updated_at)
       values (?, ?, ?, 'Refund', 5, 'AUD', 'Failed', 1, ?, 0, 0, now(), now(), now())`,
      [refund, o.merchantId, o.memberId, settled],
    );
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const ids = [collected, cancelled, paused, settled, refund, claimed, theirs, first, second];
    const results = await settle(ids.map((id) => reservations.retry({ scope: o.scope, id })));
    expect(results.map((r) => ('value' in r ? 'reserved' : r.error))).toEqual([
      new DomainError('invalid_transition', 'The period of this charge has since been paid or is being paid (a later charge of it settled or is processing).'),
      new DomainError('invalid_transition', 'The subscription is Cancelled; its charges are not retried.'),
      new DomainError('invalid_transition', 'The subscription is Paused; its charges are not retried.'),
      new DomainError('invalid_transition', 'Only a Failed charge can be retried; this one is a Settled Charge.'),
      new DomainError('invalid_transition', 'Only a Failed charge can be retried; this one is a Failed Refund.'),
      chargingNow(),
      new DomainError('not_found', 'Transaction not found.'),
      // Decided in the order sent, whatever the lock order.
      'reserved',
      chargingNow(),
    ]);
    const retries = await rows<{ original_transaction_id: string }>(`select original_transaction_id from billing.transactions where original_transaction_id in (?) and kind = 'Charge'`, [ids]);
    expect(retries.map((r) => r.original_transaction_id)).toEqual([first]);
  });

  // Optimistic (a compare-and-swap on the subscription's row; for a charge without one, the unique
  // index on a charge's retry), under the row locks from the start, and under them after one lost
  // attempt; each with and without a subscription.
  it.each([
    ['optimistically', undefined, true],
    ['optimistically, a charge without a subscription', undefined, false],
    ['under the row locks', 0, true],
    ['under the row locks, a charge without a subscription', 0, false],
    ['under the row locks after one lost attempt', 1, true],
    ['under the row locks after one lost attempt, a charge without a subscription', 1, false],
  ])('reserves concurrent retries of one charge from several replicas once (%s)', async (_mode, optimisticAttempts, withSubscription) => {
    const o = await seedMerchant();
    const sub = withSubscription ? await seedSubscription(o, 'Active') : undefined;
    const failed = await seedCharge(o, { status: 'Failed', subscriptionId: sub });
    const replicas = Array.from({ length: 4 }, () => new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS, { optimisticAttempts }));
    const results = await settle(replicas.map((r) => r.retry({ scope: o.scope, id: failed })));
    expect(results.filter((r) => 'value' in r)).toHaveLength(1);
    expect(new Set(results.flatMap((r) => ('error' in r ? [(r.error as DomainError).message] : [])))).toEqual(
      new Set(['This charge has already been retried; retry the latest attempt.']),
    );
    expect(await rows(`select id from billing.transactions where original_transaction_id = ?`, [failed])).toHaveLength(1);
  });

  it('retries, optimistically, on a fresh read after a billing run claimed the subscription between its read and its write: refused as claimed', async () => {
    const o = await seedMerchant();
    const sub = await seedSubscription(o, 'Active');
    const failed = await seedCharge(o, { status: 'Failed', subscriptionId: sub });
    // The claim lands while the retry's write waits for the subscription's row lock, after its read.
    const claimer = new pg.Client({ connectionString: url() });
    await claimer.connect();
    try {
      await claimer.query('begin');
      await claimer.query(`update billing.subscriptions set claimed_until = now() + interval '1 minute' where id = $1`, [sub]);
      const retry = settle([new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS).retry({ scope: o.scope, id: failed })]);
      for (let i = 0; ; i++) {
        if ((await rows(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length > 0) break;
        if (i === 100) throw new Error('the retry never waited for the claim');
        await new Promise((r) => setTimeout(r, 20));
      }
      await claimer.query('commit');
      expect(await retry).toEqual([{ error: chargingNow() }]);
    } finally {
      await claimer.end();
    }
    expect(await rows(`select id from billing.transactions where original_transaction_id = ?`, [failed])).toHaveLength(0);
  });

  it('records a batch of refunds in one statement: answers once, refused ones released once, unanswered ones left reserved, an event per recorded refund', async () => {
    const o = await seedMerchant();
    const [settles, refuses, silent] = [await seedCharge(o, { status: 'Settled' }), await seedCharge(o, { status: 'Settled', refundedMinor: 1000 }), await seedCharge(o, { status: 'Settled' })];
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const reserved = await Promise.all([
      reservations.refund({ scope: o.scope, id: settles, amountMinor: 2000, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: refuses, amountMinor: 500, reason: null, startedAt: new Date() }),
      reservations.refund({ scope: o.scope, id: silent, amountMinor: null, reason: null, startedAt: new Date() }),
    ]);
    const txns = reserved.map((r) => r.t);
    const asOf = new Date('2030-01-02T03:04:05.000Z');
    const outcomes = [
      { status: 'Settled' as const, providerRef: 're_1', failureReason: null },
      { status: 'Failed' as const, providerRef: 're_2', failureReason: 'provider_rejected' },
      'unavailable' as const,
    ];
    const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
    const first = await applyCallOutcomes(orm(), txns, outcomes, asOf, [trace, trace, trace]);
    expect(first).toEqual({ succeeded: 0, recorded: new Set([txns[0]!.id, txns[1]!.id]) });
    // The in-memory refunds as recorded (what the requests are answered with).
    expect(txns.map((t) => [t.status, t.providerRef, t.failureReason, t.settledAt?.toISOString() ?? null])).toEqual([
      ['Settled', 're_1', null, asOf.toISOString()],
      ['Failed', 're_2', 'provider_rejected', null],
      ['Processing', null, null, null],
    ]);
    const stored = async () =>
      rows<{ id: string; status: string; provider_ref: string | null; failure_reason: string | null; settled_at: Date | null; claimed_until: Date | null }>(
        `select id, status, provider_ref, failure_reason, settled_at, claimed_until from billing.transactions where id in (?) order by amount_minor`,
        [txns.map((t) => t.id)],
      );
    const byId = async () => new Map((await stored()).map((r) => [r.id, r]));
    const after = await byId();
    expect(after.get(txns[0]!.id)).toMatchObject({ status: 'Settled', provider_ref: 're_1', failure_reason: null, claimed_until: null });
    expect(new Date(after.get(txns[0]!.id)!.settled_at!).toISOString()).toBe(asOf.toISOString());
    expect(after.get(txns[1]!.id)).toMatchObject({ status: 'Failed', provider_ref: 're_2', failure_reason: 'provider_rejected', settled_at: null, claimed_until: null });
    // Unanswered: still Processing and unconfirmed, its claim released for the next run to repeat the call.
    expect(after.get(txns[2]!.id)).toMatchObject({ status: 'Processing', provider_ref: null, claimed_until: null });
    expect([await refundedOf(settles), await refundedOf(refuses), await refundedOf(silent)]).toEqual([2000, 1000, 9950]);
    const events = () =>
      rows<{ type: string; data: { id: string; status: string; originalTransactionId: string }; trace_context: Record<string, string> }>(
        `select type, data, trace_context from billing.outbox where data->>'id' in (?) order by seq`,
        [txns.map((t) => t.id)],
      );
    const written = await events();
    expect(written.map((e) => [e.type, e.data.id, e.data.status, e.data.originalTransactionId])).toEqual([
      ['transaction.refunded', txns[0]!.id, 'Settled', settles],
      ['transaction.failed', txns[1]!.id, 'Failed', refuses],
    ]);
    expect(written.map((e) => e.trace_context.traceparent)).toEqual([trace.traceparent, trace.traceparent]);

    // The same answers again (a second recording, e.g. by a reconciling run's answer arriving
    // late): nothing is recorded, released or written twice.
    const again = reserved.map((r) => Object.assign(Object.create(Object.getPrototypeOf(r.t)), r.t, { status: 'Processing', providerRef: null, failureReason: null, settledAt: null }) as Transaction);
    expect(await applyCallOutcomes(orm(), again.slice(0, 2), outcomes.slice(0, 2), asOf)).toEqual({ succeeded: 0, recorded: new Set() });
    expect([await refundedOf(settles), await refundedOf(refuses)]).toEqual([2000, 1000]);
    expect(await events()).toHaveLength(2);
    expect(await byId()).toEqual(after);
  });

  it('records a batch of retried charges: a settled one moves its subscription on, a failed or unanswered one releases its claim; the same answers again change nothing', async () => {
    const o = await seedMerchant();
    const subs = [await seedSubscription(o), await seedSubscription(o), await seedSubscription(o)];
    const failed = await Promise.all(subs.map((subscriptionId) => seedCharge(o, { status: 'Failed', amountMinor: 1995, subscriptionId })));
    const reservations = new TransactionReservations(orm(), ANY_PROVIDER, LEASE_MS);
    const txns = (await Promise.all(failed.map((id) => reservations.retry({ scope: o.scope, id })))).map((r) => r.t);
    const asOf = new Date('2030-01-02T03:04:05.000Z');
    const outcomes = [
      { status: 'Settled' as const, providerRef: 'ch_ok', failureReason: null },
      { status: 'Failed' as const, providerRef: 'ch_declined', failureReason: 'card_declined' },
      'unavailable' as const,
    ];
    const state = () =>
      rows<{ id: string; status: string; current_period_start: Date; next_billing_at: Date; dunning_period_start: Date | null; claimed_until: Date | null }>(
        `select id, status, current_period_start, next_billing_at, dunning_period_start, claimed_until from billing.subscriptions where id in (?) order by array_position(?::uuid[], id)`,
        [subs, `{${subs.join(',')}}`],
      );
    const claimedBefore = await state();
    expect(claimedBefore.map((s) => s.claimed_until !== null)).toEqual([true, true, true]);

    expect(await applyCallOutcomes(orm(), txns, outcomes, asOf)).toEqual({ succeeded: 1, recorded: new Set([txns[0]!.id, txns[1]!.id]) });
    const after = await state();
    // The settled retry collected the PastDue period: it is current, dunning is over, the next one is due at its end.
    expect(after[0]).toMatchObject({ status: 'Active', dunning_period_start: null, claimed_until: null });
    expect([new Date(after[0]!.current_period_start).toISOString(), new Date(after[0]!.next_billing_at).toISOString()]).toEqual([PERIOD, '2030-02-01T00:00:00.000Z']);
    // The declined and the unanswered retries moved nothing on; their claims are released.
    for (const i of [1, 2]) expect(after[i]).toEqual({ ...claimedBefore[i], claimed_until: null });
    const stored = await rows<{ status: string; provider_ref: string | null; claimed_until: Date | null }>(
      `select status, provider_ref, claimed_until from billing.transactions where id in (?) order by array_position(?::uuid[], id)`,
      [txns.map((t) => t.id), `{${txns.map((t) => t.id).join(',')}}`],
    );
    expect(stored).toEqual([
      { status: 'Settled', provider_ref: 'ch_ok', claimed_until: null },
      { status: 'Failed', provider_ref: 'ch_declined', claimed_until: null },
      { status: 'Processing', provider_ref: null, claimed_until: null },
    ]);
    const events = () => rows<{ type: string }>(`select type from billing.outbox where data->>'id' in (?) order by seq`, [txns.map((t) => t.id)]);
    expect((await events()).map((e) => e.type)).toEqual(['transaction.succeeded', 'transaction.failed']);

    // The same answers again (a reconciling run's, arriving late): nothing is recorded, moved on or written twice.
    const again = txns.map((t) => Object.assign(Object.create(Object.getPrototypeOf(t)), t, { status: 'Processing', providerRef: null, failureReason: null, settledAt: null }) as Transaction);
    expect(await applyCallOutcomes(orm(), again.slice(0, 2), outcomes.slice(0, 2), asOf)).toEqual({ succeeded: 0, recorded: new Set() });
    expect(await state()).toEqual(after);
    expect(await events()).toHaveLength(2);
  });
});
