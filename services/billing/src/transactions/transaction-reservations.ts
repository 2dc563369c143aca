import type { MikroORM } from '@mikro-orm/postgresql';
import { distinctUuids, DomainError } from '@billing/contracts';
import { decideItem, isUniqueViolation, LOST, optimisticWriter, typedDatabaseError, type CallScope, type ItemOutcome, type Lost, type PreparedQuery } from '@billing/service-runtime';
import { normalisePercent, platformFee, type FeeTerms } from '../fees/platform-fee.js';
import { chargeOrder, methodsByMember, type ChargeableMethod } from '../billing-runs/billing-run-store.js';
import type { Merchant, ProviderEnvironment } from '../merchants/merchant.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { pickScoped } from '../merchant-scope.js';
import { chargingNow, type Subscription } from '../subscriptions/subscription.js';
import { subscriptionOfRow, unchangedSubscriptionsSql, type SubscriptionRow } from '../subscriptions/subscription-row.js';
import { Transaction } from './transaction.js';
import { rowOfTransaction, TRANSACTION_RECORDSET, transactionColumns, transactionOfRow, type TransactionRow } from './transaction-row.js';

export interface RefundRequest {
  scope: CallScope;
  id: string;
  /** Integer minor units, or null for all that is left. */
  amountMinor: number | null;
  reason: string | null;
  /**
   * When the request arrived (this service's clock): a refund of the charge whose outcome was
   * unknown before then refuses it (see `refund`); one whose call was still in flight does not.
   */
  startedAt: Date;
}

export interface RetryRequest {
  scope: CallScope;
  id: string;
  /**
   * The payment methods this retry has charged already (its earlier attempts, each declined): the
   * attempt takes the first method not among them in `chargeOrder`.
   */
  tried?: readonly string[];
}

/** What a transaction's provider call needs of its merchant (as `Known.merchants` of `callProviderFor` holds it). */
export type MerchantOfCall = Pick<Merchant, 'providerEnvironment'>;

/** A committed `Processing` transaction and what its provider call needs, read while reserving it. */
export interface Reservation {
  t: Transaction;
  merchant: MerchantOfCall;
  /** A refund's charge (as locked when reserving): its provider ref, which a settled charge never changes. */
  original?: { id: string; providerRef: string | null };
  /** A retry's payment method, as the reservation read it (so the call need not read it again). */
  method?: ChargeableMethod;
}

type Reserved = ItemOutcome<Reservation>;

/**
 * Refuses, before anything is reserved, a call for a merchant whose environment has no payment
 * provider: nothing could be sent, so the answer is definite and trying again is safe.
 */
function assertProviderFor(providers: Pick<PaymentProviders, 'configuredFor'>, merchant: MerchantOfCall, done: 'refunded' | 'charged'): void {
  if (providers.configuredFor(merchant.providerEnvironment)) return;
  throw new DomainError(
    'provider_unavailable',
    `No payment provider is configured for this merchant's environment (${merchant.providerEnvironment}); nothing was ${done} and nothing was recorded, so trying again is safe once one is.`,
  );
}

/** The reservation, or the DomainError that refused it. */
function answerOf(reserved: Reserved): Reservation {
  if (!reserved.ok) throw reserved.error;
  return reserved.value;
}

/** How a refund's or retry's attempt ended: answered, or lost to a concurrent writer of its rows (the charge's refunded amount; a retry's subscription claim or the charge's retry), to be tried again. */
type ReservationAttempt = Reserved | Lost;

/** A locked charge row with its merchant's terms (and, read for refunds, its refunds not yet confirmed). */
interface LockedRow extends TransactionRow {
  provider_environment: ProviderEnvironment;
  platform_fee_percent: string;
  platform_fee_fixed_minor: string;
  unconfirmed_refunds?: UnconfirmedRefund[];
}

/** A `Processing` refund of a charge whose provider call has not been confirmed (as JSON: instants as text). */
interface UnconfirmedRefund {
  id: string;
  claimedUntil: string | null;
  outcomeUnknownAt: string | null;
  createdAt: string;
}

/** When this process started: a reservation older than it was made by a process before it. */
const PROCESS_STARTED_AT = new Date();

/**
 * The refund of `unconfirmed` whose outcome was already unknown when a request that arrived at
 * `startedAt` began: it was answered provider_unavailable before then (`outcomeUnknownAt`), or
 * its reservation's lease had run out (the request that made it is gone), or it was reserved
 * before `processStartedAt`, when the process deciding started: then the request that made it
 * was another process's, typically the one this process replaced after a crash (its caller was
 * answered 503, outcome unknown, while its lease still runs). Rarely it is a replica's call still
 * in flight across this process's start; refusing a refund beside it then is the safe side. One
 * whose call was in flight then in this process, a concurrent request's, is not unknown: that
 * request has not answered yet.
 */
export function refundOfUnknownOutcome(unconfirmed: readonly UnconfirmedRefund[], startedAt: Date, processStartedAt: Date = PROCESS_STARTED_AT): string | null {
  const before = (at: string | null) => at !== null && new Date(at).getTime() <= startedAt.getTime();
  const older = (r: UnconfirmedRefund) => new Date(r.createdAt).getTime() < processStartedAt.getTime();
  return unconfirmed.find((r) => (r.outcomeUnknownAt !== null ? before(r.outcomeUnknownAt) : r.claimedUntil === null || before(r.claimedUntil) || older(r)))?.id ?? null;
}

interface LockedCharge {
  charge: Transaction;
  merchant: MerchantOfCall & { feeTerms: FeeTerms };
  unconfirmedRefunds: UnconfirmedRefund[];
}

function lockedChargeOf(r: LockedRow): LockedCharge {
  return {
    charge: transactionOfRow(r),
    unconfirmedRefunds: r.unconfirmed_refunds ?? [],
    merchant: { providerEnvironment: r.provider_environment, feeTerms: { percent: normalisePercent(r.platform_fee_percent), fixedHundredths: Number(r.platform_fee_fixed_minor) } },
  };
}

/**
 * The reservations of refunds and retries (contract §7), written in SQL and group-committed:
 * the requests that arrive together share one attempt, where the ORM spent a find and a
 * hydration per kind of row and its unit of work per request. Both are optimistic (see `refund`
 * and `retry`: a read and a compare-and-swap write, two autocommit statements), under the rows'
 * locks once a request has lost its optimistic attempts (`optimisticWriter`). The domain decides
 * each request as it does alone (`Transaction.reserveRefund`, `assertRetryable`, the
 * subscription's due period); locked rows are locked in id order, charges first, then
 * subscriptions (the lock order of a retry alone), so concurrent batches cannot deadlock, and
 * concurrent refunds of a charge can never together exceed it. Requests on one
 * charge never share a batch: the second is decided after the first committed. Another
 * merchant's transaction is `not_found`, as a missing one. A DomainError is that request's answer
 * and writes nothing of it; any other failure rolls the batch back and its requests run again one
 * per transaction (`Batcher`), so a database error reaches only the request that causes it, as
 * MikroORM's typed exception.
 */
export class TransactionReservations {
  private readonly refunds: (r: RefundRequest) => Promise<Reserved>;
  private readonly retries: (r: RetryRequest) => Promise<Reserved>;
  private readonly processStartedAt: Date;

  /**
   * `providers`: which merchant environments have a payment provider; nothing is reserved for a
   * merchant whose environment has none (nothing could be sent). `leaseMs`: how long a
   * reservation keeps billing runs off its unconfirmed call (and a retry off its subscription).
   * `optimisticAttempts` (default 5): 0 decides every refund under its charge's row lock, as
   * tests of that path do. `processStartedAt` (default: when this process started): refunds
   * reserved before it are another process's (see `refundOfUnknownOutcome`).
   */
  constructor(
    private readonly orm: MikroORM,
    private readonly providers: Pick<PaymentProviders, 'configuredFor'>,
    private readonly leaseMs: number,
    opts: { optimisticAttempts?: number; processStartedAt?: Date } = {},
  ) {
    const keyOf = (r: { id: string }) => r.id.toLowerCase();
    const { optimisticAttempts } = opts;
    this.processStartedAt = opts.processStartedAt ?? PROCESS_STARTED_AT;
    this.refunds = optimisticWriter<RefundRequest, Reserved>(orm, (query, batch, mode) => this.reserveRefunds(query, batch, mode), { keyOf, optimisticAttempts });
    // Retries of two charges of one subscription may share a batch: the first claims the
    // subscription (on the aggregate both see), which refuses the second, as when they run in turn.
    this.retries = optimisticWriter<RetryRequest, Reserved>(orm, (query, batch, mode) => this.reserveRetries(query, batch, mode), { keyOf, optimisticAttempts });
  }

  /**
   * Reserves a refund of a Settled charge: a `Processing` refund, its amount added to the
   * charge's `refundedMinor`, committed. Optimistic, as the subscription transitions are: the
   * refunds that arrive together share one attempt of two autocommit statements, a read of their
   * charges (without locks), then, once the domain has decided each (`Transaction.reserveRefund`),
   * one write that adds each refund's amount to its charge only if the charge's refunded amount
   * is still as read (a compare-and-swap) and inserts the refunds of the charges it updated. A
   * refund whose charge changed in between (another refund, a refused refund's release) is
   * decided again on a fresh read in a later batch; after its optimistic attempts have all lost,
   * under the charge's row lock (in a transaction), which cannot lose. So concurrent refunds of
   * a charge can never together exceed it, as under the lock.
   *
   * Refused, with nothing reserved: a merchant whose environment has no payment provider
   * (provider_unavailable); a charge with a refund whose provider call's outcome was unknown when
   * the request arrived (`refundOfUnknownOutcome`: a conflict naming it), since that refund may
   * well have been made and is completed by the next billing run. A refund racing with one whose
   * call is still in flight is decided on the amount left, as before.
   */
  async refund(r: RefundRequest): Promise<Reservation> {
    return answerOf(await this.submitted(this.refunds(r)));
  }

  /**
   * Reserves a retry of a Failed charge: a `Processing` charge of `attempt + 1` on the first of
   * the member's payment methods as they are now in `chargeOrder` (the subscription's own, then
   * by rank; not simply the failed charge's: it may have been demoted or removed since; those that
   * failed the period, the retried charge's among them, after the others), leaving out those in `tried`, its subscription claimed, committed; a
   * member with no such method is a conflict, and nothing is reserved. Optimistic, as refunds
   * are: a batch reads its charges with their subscriptions, whether each was retried and its
   * member's methods (one statement, without locks), the domain decides
   * each retry, and one statement claims each subscription only if its row is still as read (a
   * compare-and-swap) and inserts the retries of the charges it claimed. A retry of a charge
   * without a subscription is kept from being inserted twice by `transactions_retry_unique`; one
   * that lost either way is decided again on a fresh read (where it finds the charge retried or
   * its subscription claimed), and after its optimistic attempts under the rows' locks.
   */
  async retry(r: RetryRequest): Promise<Reservation> {
    return answerOf(await this.submitted(this.retries(r)));
  }

  /** A batch's answer to a request, a database error as MikroORM's typed exception. */
  private async submitted<T>(submitted: Promise<T>): Promise<T> {
    try {
      return await submitted;
    } catch (e) {
      throw typedDatabaseError(this.orm, e);
    }
  }

  /**
   * Locks the batch's charges (in id order) with their merchants' terms, or with `lock: false`
   * reads them; malformed ids find nothing. `for no key update`, the lock an update of their
   * refunded amount takes: an optimistic retry's insert, which holds its subscription's lock,
   * takes a key-share lock on the charge it retries, which this does not block (so the two
   * cannot deadlock).
   */
  private async lockCharges(
    query: PreparedQuery,
    batch: readonly { id: string }[],
    opts: { lock: boolean; unconfirmedRefunds?: boolean } = { lock: true },
  ): Promise<Map<string, LockedCharge>> {
    const ids = distinctUuids(batch.map((r) => r.id));
    if (ids.length === 0) return new Map();
    // For refunds, each charge's refunds not yet confirmed too, on `transactions_original_index`.
    const refunds = opts.unconfirmedRefunds
      ? `,
              (select coalesce(json_agg(json_build_object('id', r.id, 'claimedUntil', r.claimed_until, 'outcomeUnknownAt', r.outcome_unknown_at, 'createdAt', r.created_at) order by r.created_at), '[]')
                 from transactions r
                where r.original_transaction_id = t.id and r.kind = 'Refund' and r.status = 'Processing' and r.provider_ref is null) as unconfirmed_refunds`
      : '';
    const { rows } = await query<LockedRow>(
      `transaction_${opts.unconfirmedRefunds ? 'refund' : 'reserve'}_${opts.lock ? 'lock' : 'read'}`,
      `select ${transactionColumns('t')}, m.provider_environment, m.platform_fee_percent::text, m.platform_fee_fixed_minor${refunds}
         from transactions t join merchants m on m.id = t.merchant_id
        where t.id = any($1::uuid[])
        order by t.id${opts.lock ? '\n          for no key update of t' : ''}`,
      [ids],
    );
    return new Map(rows.map((r) => [r.id, lockedChargeOf(r)]));
  }

  /** One attempt of a batch of refunds (see `refund`, `optimisticWriter`): with `lock`, in the caller's transaction, under the charges' row locks, where no write can be lost. */
  private async reserveRefunds(query: PreparedQuery, batch: readonly RefundRequest[], opts: { lock: boolean }): Promise<ReservationAttempt[]> {
    const locked = await this.lockCharges(query, batch, { ...opts, unconfirmedRefunds: true });
    const charges = new Map([...locked].map(([id, l]) => [id, l.charge]));
    /** Each charge's refunded amount as read, before the batch's decisions add to it. */
    const read = new Map([...charges].map(([id, c]) => [id, c.refundedMinor]));
    const refunds: Transaction[] = [];
    const out = batch.map((r): Reserved => decideItem((): Reservation => {
      const charge = pickScoped(charges, r.scope, r.id, 'Transaction');
      const { merchant, unconfirmedRefunds } = locked.get(charge.id)!;
      const unknown = refundOfUnknownOutcome(unconfirmedRefunds, r.startedAt, this.processStartedAt);
      if (unknown) {
        throw new DomainError(
          'conflict',
          `Refund ${unknown} of this charge has an unknown outcome (its provider call got no answer); the next billing run completes it with the same idempotency key. Nothing was refunded by this request: look that refund up before refunding again.`,
          { transactionId: unknown },
        );
      }
      const amount = charge.reserveRefund(r.amountMinor);
      assertProviderFor(this.providers, merchant, 'refunded');
      const t = Object.assign(new Transaction(), {
        merchantId: charge.merchantId,
        memberId: charge.memberId,
        subscriptionId: charge.subscriptionId,
        paymentMethodId: charge.paymentMethodId,
        kind: 'Refund' as const,
        amountMinor: amount,
        currency: charge.currency,
        originalTransactionId: charge.id,
        reason: r.reason,
        claimedUntil: new Date(Date.now() + this.leaseMs),
      });
      refunds.push(t);
      return { t, merchant: { providerEnvironment: merchant.providerEnvironment }, original: { id: charge.id, providerRef: charge.providerRef } };
    }));
    if (refunds.length === 0) return out;
    const reserved = new Map(refunds.map((t) => [t.originalTransactionId!, charges.get(t.originalTransactionId!)!.refundedMinor]));
    if (opts.lock) {
      await writeReservations(query, 'transaction_reserve_refunds', refunds, { table: 'transactions', column: 'refunded_minor', type: 'bigint', values: reserved });
      return out;
    }
    const written = await writeRefundsIfUnchanged(query, refunds, [...reserved].map(([id, value]) => ({ id, expected: read.get(id)!, value })));
    return out.map((o) => (o.ok && !written.has(o.value.t.originalTransactionId!) ? LOST : o));
  }

  /** One attempt of a batch of retries (see `retry`, `optimisticWriter`): with `lock`, in the caller's transaction, under the charges' and subscriptions' row locks. */
  private async reserveRetries(query: PreparedQuery, batch: readonly RetryRequest[], opts: { lock: boolean }): Promise<ReservationAttempt[]> {
    const { charges, subs, retried, methods, failedPeriod } = opts.lock ? await this.lockRetryFacts(query, batch) : await readRetryFacts(query, batch);
    const failed = new Map([...charges].map(([id, l]) => [id, l.charge]));
    const retries: Transaction[] = [];
    const claimed = new Map<string, Date>();
    const out = batch.map((r): Reserved => decideItem((): Reservation => {
      const f = pickScoped(failed, r.scope, r.id, 'Transaction');
      f.assertRetryable();
      if (retried.has(f.id)) throw new DomainError('invalid_transition', 'This charge has already been retried; retry the latest attempt.');
      const sub = f.subscriptionId ? subs.get(f.subscriptionId)?.sub : undefined;
      if (sub) {
        if (sub.status !== 'Active' && sub.status !== 'PastDue') throw new DomainError('invalid_transition', `The subscription is ${sub.status}; its charges are not retried.`);
        if (sub.duePeriodStart()?.getTime() !== f.periodStart?.getTime()) throw new DomainError('invalid_transition', 'The period of this charge has since been paid or is being paid (a later charge of it settled or is processing).');
        if (sub.claimedUntil && sub.claimedUntil > new Date()) throw chargingNow();
      }
      const failedBefore = new Set([...(failedPeriod.get(f.id) ?? []), ...(f.paymentMethodId ? [f.paymentMethodId] : [])]);
      const method = chargeOrder(methods.get(f.memberId) ?? [], sub, failedBefore).find((pm) => !r.tried?.includes(pm.id));
      if (!method) {
        throw new DomainError('conflict', r.tried?.length
          ? "Every one of the member's payment methods has been tried by this retry."
          : 'The member has no payment method to charge; nothing was charged. Add one, then retry.');
      }
      const { merchant } = charges.get(f.id)!;
      assertProviderFor(this.providers, merchant, 'charged');
      const lease = new Date(Date.now() + this.leaseMs);
      const t = Object.assign(new Transaction(), {
        merchantId: f.merchantId,
        memberId: f.memberId,
        subscriptionId: f.subscriptionId,
        paymentMethodId: method.id,
        kind: 'Charge' as const,
        amountMinor: f.amountMinor,
        currency: f.currency,
        attempt: f.attempt + 1,
        originalTransactionId: f.id,
        periodStart: f.periodStart,
        feeMinor: platformFee(f.amountMinor, f.currency, merchant.feeTerms),
        claimedUntil: lease,
      });
      if (sub) {
        sub.claimedUntil = lease;
        claimed.set(sub.id, lease);
      }
      retries.push(t);
      return { t, merchant: { providerEnvironment: merchant.providerEnvironment }, method };
    }));
    if (retries.length === 0) return out;
    if (opts.lock) {
      await writeReservations(query, 'transaction_reserve_retries', retries, { table: 'subscriptions', column: 'claimed_until', type: 'timestamptz', values: claimed });
      return out;
    }
    const written = await writeRetriesIfUnchanged(query, retries, [...claimed].map(([id, value]) => ({ id, read: subs.get(id)!.read, value })));
    return out.map((o) => (o.ok && !written.has(o.value.t.originalTransactionId!) ? LOST : o));
  }

  /**
   * The retries' facts under locks: the charges (in id order), then their subscriptions (in id
   * order: the lock order of a retry alone), then which charges were retried; and, without
   * locks, their members' payment methods.
   */
  private async lockRetryFacts(query: PreparedQuery, batch: readonly RetryRequest[]): Promise<RetryFacts> {
    const charges = await this.lockCharges(query, batch);
    const subIds = [...new Set([...charges.values()].flatMap((l) => l.charge.subscriptionId ?? []))];
    const memberIds = [...new Set([...charges.values()].map((l) => l.charge.memberId))];
    // After the charges' locks, so a retry of one of these charges committed meanwhile is seen.
    const { rows } = charges.size === 0 ? { rows: [] } : await query<{ subs: SubscriptionRow[]; retried: string[]; methods: ChargeableMethod[]; failed: { id: string; methods: string[] }[] }>(
      'transaction_reserve_retry_facts',
      `with subs as materialized (
         select to_jsonb(s) as sub from subscriptions s where s.id = any($2::uuid[]) order by s.id for update of s)
       select coalesce((select json_agg(sub) from subs), '[]') as subs,
              coalesce((select json_agg(t.id) from transactions t where t.id = any($1::uuid[]) and ${SUPERSEDED_SQL}), '[]') as retried,
              coalesce((select json_agg(${CHARGEABLE_METHOD_JSON} order by x.member_id, x.rank)
                          from payment_methods x where x.member_id = any($3::uuid[])), '[]') as methods,
              coalesce((select json_agg(json_build_object('id', t.id, 'methods', ${FAILED_PERIOD_METHODS_SQL}))
                          from transactions t where t.id = any($1::uuid[])), '[]') as failed`,
      [[...charges.keys()], subIds, memberIds],
    );
    return {
      charges,
      subs: new Map((rows[0]?.subs ?? []).map((r) => [r.id, { sub: subscriptionOfRow(r), read: r }])),
      retried: new Set(rows[0]?.retried ?? []),
      methods: methodsByMember(rows[0]?.methods ?? []),
      failedPeriod: new Map((rows[0]?.failed ?? []).map((r) => [r.id, r.methods])),
    };
  }
}

/**
 * What a batch of retries is decided on: the charges with their merchants' terms, their
 * subscriptions (each with its row as read), the ids of the charges already retried, and the
 * charges' members' payment methods in rank order (by member id), one of which each retry charges.
 */
interface RetryFacts {
  charges: Map<string, LockedCharge>;
  subs: Map<string, { sub: Subscription; read: SubscriptionRow }>;
  retried: Set<string>;
  methods: Map<string, ChargeableMethod[]>;
  /** By charge id: the payment methods of its period's Failed charges, which its retry tries after the others. */
  failedPeriod: Map<string, string[]>;
}

/**
 * For a charge `t`: the payment methods of the Failed charges of its subscription's period (a
 * declined card, a bank debit that failed at settlement), as a JSON array, in SQL.
 */
const FAILED_PERIOD_METHODS_SQL = `coalesce((select json_agg(distinct p.payment_method_id) from transactions p
   where p.subscription_id = t.subscription_id and p.period_start = t.period_start and p.kind = 'Charge'
     and p.status = 'Failed' and p.payment_method_id is not null), '[]')`;

/**
 * For a charge `t`: whether it was retried, by a manual retry of it or by a later attempt of its
 * period (a billing run's), in SQL. Only a period's latest attempt is retried, so that a retry's
 * `attempt + 1` is a number the period has not used: a retry of attempt 1 after the run's attempt
 * 2 was numbered 2 again.
 */
const SUPERSEDED_SQL = `exists (select 1 from transactions r where r.kind = 'Charge'
   and (r.original_transaction_id = t.id or (r.subscription_id = t.subscription_id and r.period_start = t.period_start and r.attempt > t.attempt)))`;

/** A `payment_methods x` row as a `ChargeableMethod`, in SQL. */
const CHARGEABLE_METHOD_JSON = `json_build_object('id', x.id, 'memberId', x.member_id, 'type', x.type, 'last4', x.last4, 'providerToken', x.provider_token, 'rank', x.rank)`;


/** The retries' facts without locks, in one statement; malformed ids find nothing. */
async function readRetryFacts(query: PreparedQuery, batch: readonly RetryRequest[]): Promise<RetryFacts> {
  const ids = distinctUuids(batch.map((r) => r.id));
  const { rows } = ids.length === 0 ? { rows: [] } : await query<LockedRow & { sub: SubscriptionRow | null; retried: boolean; methods: ChargeableMethod[]; failed: string[] }>(
    'transaction_retry_read',
    `select ${transactionColumns('t')}, m.provider_environment, m.platform_fee_percent::text, m.platform_fee_fixed_minor,
            (select to_jsonb(s) from subscriptions s where s.id = t.subscription_id) as sub,
            coalesce((select json_agg(${CHARGEABLE_METHOD_JSON} order by x.rank) from payment_methods x where x.member_id = t.member_id), '[]') as methods,
            ${SUPERSEDED_SQL} as retried,
            ${FAILED_PERIOD_METHODS_SQL} as failed
       from transactions t join merchants m on m.id = t.merchant_id
      where t.id = any($1::uuid[])`,
    [ids],
  );
  return {
    charges: new Map(rows.map((r) => [r.id, lockedChargeOf(r)])),
    subs: new Map(rows.flatMap((r) => (r.sub ? [[r.sub.id, { sub: subscriptionOfRow(r.sub), read: r.sub }] as const] : []))),
    retried: new Set(rows.filter((r) => r.retried).map((r) => r.id)),
    methods: new Map(rows.map((r) => [r.member_id, r.methods])),
    failedPeriod: new Map(rows.map((r) => [r.id, r.failed])),
  };
}

/**
 * One round trip: inserts the reserved transactions and sets one column on the rows of `table`
 * they reserve (the refunded charges' `refunded_minor`, the retried subscriptions' claim). The
 * update also names its rows with `id = any($3)`, which keeps it on the primary key (joined to
 * the recordset alone, the planner may scan the table). Throws, so the transaction rolls back,
 * unless every row was written: that cannot happen (the rows are locked, a refused row fails
 * the statement).
 */
async function writeReservations(
  query: PreparedQuery,
  name: string,
  transactions: Transaction[],
  update: { table: 'transactions' | 'subscriptions'; column: 'refunded_minor' | 'claimed_until'; type: 'bigint' | 'timestamptz'; values: Map<string, number | Date> },
): Promise<void> {
  const { table, column, type, values } = update;
  const { rows } = await query<{ inserted: number; updated: number }>(
    name,
    `with inserted as (
       insert into transactions (${transactionColumns()})
       select * from jsonb_to_recordset($1::jsonb) as r(${TRANSACTION_RECORDSET})
       returning 1),
     updated as (
       update ${table} u set ${column} = c.value
         from jsonb_to_recordset($2::jsonb) as c(id uuid, value ${type})
        where u.id = c.id and u.id = any($3::uuid[])
       returning 1)
     select (select count(*) from inserted)::int as inserted, (select count(*) from updated)::int as updated`,
    [JSON.stringify(transactions.map(rowOfTransaction)), JSON.stringify([...values].map(([id, value]) => ({ id, value }))), [...values.keys()]],
  );
  const [row] = rows;
  if (row!.inserted !== transactions.length || row!.updated !== values.size) {
    throw new Error(`${name} wrote ${row!.inserted}/${transactions.length} transactions, ${row!.updated}/${values.size} ${table}`);
  }
}

/**
 * The optimistic write of a batch of refunds, one autocommit statement: each charge's refunded
 * amount set to its new `value` only where it is still `expected` (and the charge still a
 * Settled charge), and the refunds of the charges it updated inserted. Returns the ids of those
 * charges; a refund of any other charge wrote nothing and is decided again. The update also names
 * its rows with `id = any($3)`, as `writeReservations` does.
 */
async function writeRefundsIfUnchanged(query: PreparedQuery, refunds: Transaction[], charges: { id: string; expected: number; value: number }[]): Promise<Set<string>> {
  const { rows } = await query<{ id: string }>(
    'transaction_reserve_refunds_cas',
    `with updated as (
       update transactions u set refunded_minor = c.value
         from jsonb_to_recordset($2::jsonb) as c(id uuid, expected bigint, value bigint)
        where u.id = c.id and u.id = any($3::uuid[]) and u.refunded_minor = c.expected and u.kind = 'Charge' and u.status = 'Settled'
       returning u.id),
     inserted as (
       insert into transactions (${transactionColumns()})
       select r.* from jsonb_to_recordset($1::jsonb) as r(${TRANSACTION_RECORDSET})
        where r.original_transaction_id in (select id from updated)
       returning original_transaction_id)
     select original_transaction_id as id from inserted`,
    [JSON.stringify(refunds.map(rowOfTransaction)), JSON.stringify(charges), charges.map((c) => c.id)],
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * The optimistic write of a batch of retries, one autocommit statement: each subscription's
 * claim set only where its row is still as read (locked in id order, as every writer of
 * subscriptions locks them; a row changed meanwhile is left alone), and the retries inserted of
 * the charges without a subscription and of those whose subscription it claimed. Returns the ids
 * of the charges it retried; a retry of any other charge wrote nothing and is decided again. A
 * concurrent retry of a charge without a subscription (from another replica) fails the statement
 * on `transactions_retry_unique`: then nothing was written and every retry of the batch is
 * decided again.
 */
async function writeRetriesIfUnchanged(query: PreparedQuery, retries: Transaction[], claims: { id: string; read: SubscriptionRow; value: Date }[]): Promise<Set<string>> {
  try {
    const { rows } = await query<{ id: string }>(
      'transaction_reserve_retries_cas',
      `with c as (
         select * from jsonb_to_recordset($2::jsonb) as c(id uuid, read jsonb, value timestamptz)),
       unchanged as materialized (${unchangedSubscriptionsSql('$3')}),
       claimed as (
         update subscriptions s set claimed_until = c.value
           from c
          where s.id = c.id and s.id = any($3::uuid[]) and s.id in (select id from unchanged)
         returning s.id),
       inserted as (
         insert into transactions (${transactionColumns()})
         select r.* from jsonb_to_recordset($1::jsonb) as r(${TRANSACTION_RECORDSET})
          where r.subscription_id is null or r.subscription_id in (select id from claimed)
         returning original_transaction_id)
       select original_transaction_id as id from inserted`,
      [JSON.stringify(retries.map(rowOfTransaction)), JSON.stringify(claims), claims.map((c) => c.id)],
    );
    return new Set(rows.map((r) => r.id));
  } catch (e) {
    if (isUniqueViolation(e, 'transactions_retry_unique')) return new Set();
    throw e;
  }
}
