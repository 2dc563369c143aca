import { randomUUID } from 'node:crypto';
import { queryRows, type SqlContext } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import type { PaymentMethod } from '../payment-methods/payment-method.js';
import type { Subscription } from '../subscriptions/subscription.js';
import { SUBSCRIPTION_COLUMNS, subscriptionOfRow, type SubscriptionRow } from '../subscriptions/subscription-row.js';
import type { Transaction, TransactionStatus } from '../transactions/transaction.js';
import { rowOfTransaction, TRANSACTION_RECORDSET, transactionColumns } from '../transactions/transaction-row.js';

/**
 * The writes of a billing run's chunks, one statement per kind of row for the whole chunk
 * (a billing run writes hundreds of rows per chunk; the unit of work would diff and write them
 * one entity at a time). The domain still decides: `Subscription` and `Transaction` compute
 * every new state; these functions only persist it. Each runs in the caller's transaction.
 */

const iso = (d: Date | null | undefined) => d?.toISOString() ?? null;

/**
 * Subscriptions by id, as detached aggregates (outside the unit of work: `saveBillingStates`
 * writes them), in id order; `lock` takes their row locks for this transaction, in that order.
 */
export async function loadSubscriptions(db: SqlContext, ids: string[], opts: { lock?: boolean } = {}): Promise<Subscription[]> {
  if (ids.length === 0) return [];
  // Hand-mapped: hydrating a chunk's entities through the ORM cost more than the run's SQL.
  const rows = await queryRows<SubscriptionRow>(db, `select ${SUBSCRIPTION_COLUMNS} from subscriptions where id = any(?::uuid[]) order by id${opts.lock ? ' for update' : ''}`, [ids]);
  return rows.map(subscriptionOfRow);
}

/** What a provider call needs of a payment method. */
export type ChargeableMethod = Pick<PaymentMethod, 'id' | 'memberId' | 'type' | 'last4' | 'providerToken' | 'rank'>;

/**
 * The order a subscription's charge tries its member's methods (`ranked`, in rank order): the
 * method the subscription names first, when the member still has it, then the others by rank;
 * those in `failedBefore` (that failed the period in an earlier attempt, such as a bank debit
 * that failed at settlement after looking like a success) after all the others, in that order.
 * A subscription charged on its own method only (`ownMethodOnly`, made by a hosted checkout)
 * tries that one alone.
 */
export function chargeOrder(
  ranked: readonly ChargeableMethod[],
  sub: Pick<Subscription, 'paymentMethodId' | 'ownMethodOnly'> | undefined,
  failedBefore?: ReadonlySet<string>,
): ChargeableMethod[] {
  const preferred = sub?.paymentMethodId ? ranked.find((pm) => pm.id === sub.paymentMethodId) : undefined;
  if (sub?.ownMethodOnly) return preferred ? [preferred] : [];
  const order = preferred ? [preferred, ...ranked.filter((pm) => pm !== preferred)] : [...ranked];
  return failedBefore?.size ? [...order.filter((pm) => !failedBefore.has(pm.id)), ...order.filter((pm) => failedBefore.has(pm.id))] : order;
}

/** Methods grouped by member, each member's in the order given (rank order, as loaded). */
export function methodsByMember(methods: readonly ChargeableMethod[]): Map<string, ChargeableMethod[]> {
  const out = new Map<string, ChargeableMethod[]>();
  for (const pm of methods) (out.get(pm.memberId) ?? out.set(pm.memberId, []).get(pm.memberId)!).push(pm);
  return out;
}

/** The payment methods of members (`byMember`: theirs, in rank order) or with ids (`byId`). */
export async function loadPaymentMethods(db: SqlContext, by: { memberIds: string[] } | { ids: string[] }): Promise<ChargeableMethod[]> {
  const ids = 'ids' in by ? by.ids : by.memberIds;
  if (ids.length === 0) return [];
  const rows = await queryRows<{ id: string; member_id: string; type: PaymentMethod['type']; last4: string; provider_token: string | null; rank: number }>(
    db,
    `select id, member_id, type, last4, provider_token, rank from payment_methods where ${'ids' in by ? 'id' : 'member_id'} = any(?::uuid[]) order by member_id, rank`,
    [ids],
  );
  return rows.map((r) => ({ id: r.id, memberId: r.member_id, type: r.type, last4: r.last4, providerToken: r.provider_token, rank: r.rank }));
}

/** An integration event to write to the outbox (the envelope of `recordEvent`). */
export interface PendingEvent {
  type: string;
  merchantId: string;
  data: Record<string, unknown>;
  /** Trace headers of the request that caused it, when a batch carries several requests' events; else the caller's. */
  traceContext?: Record<string, string>;
}

/** Inserts new `Processing` transactions (a chunk's charges). */
export async function insertTransactions(db: SqlContext, txns: Transaction[]): Promise<void> {
  if (txns.length === 0) return;
  // One statement for the chunk (jsonb_to_recordset): see the module comment.
  await queryRows(
    db,
    `insert into transactions (${transactionColumns()})
     select * from jsonb_to_recordset(?::jsonb) as r(${TRANSACTION_RECORDSET})`,
    [JSON.stringify(txns.map(rowOfTransaction))],
  );
}

/**
 * Writes the billing state of subscriptions (everything a billing run changes: status, period,
 * dunning, pause and cancel instants, claim). The caller holds their row locks since it read
 * them in this transaction, so nothing it writes over is newer than what it read.
 */
export async function saveBillingStates(db: SqlContext, subs: Subscription[]): Promise<void> {
  if (subs.length === 0) return;
  // One statement for the chunk (jsonb_to_recordset): see the module comment.
  await queryRows(db, saveBillingStatesSql(), [billingStatesJson(subs)]);
}

/**
 * The update writing subscriptions' billing states (parameter: `billingStatesJson`). With
 * `recorded`, the name of a CTE returning transaction ids, only the states given with one of
 * those ids are written (a second parameter, the subscriptions' ids, keeps it on the primary key),
 * returning the subscriptions' ids.
 */
export function saveBillingStatesSql(recorded?: string): string {
  return `update subscriptions s set status = r.status, current_period_start = r.current_period_start, current_period_end = r.current_period_end,
            next_billing_at = r.next_billing_at, paused_at = r.paused_at, resume_at = r.resume_at, cancelled_at = r.cancelled_at,
            dunning_period_start = r.dunning_period_start, dunning_started_at = r.dunning_started_at, retry_count = r.retry_count,
            claimed_until = r.claimed_until, updated_at = r.updated_at
       from jsonb_to_recordset(?::jsonb) as r(id uuid, status text, current_period_start timestamptz, current_period_end timestamptz,
            next_billing_at timestamptz, paused_at timestamptz, resume_at timestamptz, cancelled_at timestamptz, dunning_period_start timestamptz,
            dunning_started_at timestamptz, retry_count int, claimed_until timestamptz, updated_at timestamptz, transaction_id uuid)${recorded ? `
       join ${recorded} w on w.id = r.transaction_id` : ''}
      where s.id = r.id${recorded ? ` and s.id = any(?::uuid[])
      returning s.id` : ''}`;
}

/** Subscriptions' billing states as `saveBillingStatesSql` reads them, each with the transaction whose recording writes it (`transactionIds`, in the same order) if any. */
export function billingStatesJson(subs: Subscription[], transactionIds?: string[]): string {
  return JSON.stringify(
    subs.map((s, i) => ({
      id: s.id,
      status: s.status,
      current_period_start: iso(s.currentPeriodStart),
      current_period_end: iso(s.currentPeriodEnd),
      next_billing_at: iso(s.nextBillingAt),
      paused_at: iso(s.pausedAt),
      resume_at: iso(s.resumeAt),
      cancelled_at: iso(s.cancelledAt),
      dunning_period_start: iso(s.dunningPeriodStart),
      dunning_started_at: iso(s.dunningStartedAt),
      retry_count: s.retryCount,
      claimed_until: iso(s.claimedUntil),
      updated_at: iso(s.updatedAt),
      transaction_id: transactionIds?.[i] ?? null,
    })),
  );
}

/** Sets (or, with null, releases) the claim of a billing run on subscriptions whose rows the caller has locked. */
export async function setClaims(db: SqlContext, ids: string[], until: Date | null): Promise<void> {
  if (ids.length === 0) return;
  await queryRows(db, `update subscriptions set claimed_until = ?::timestamptz where id = any(?::uuid[])`, [iso(until), ids]);
}

/** A provider's answer to record on a transaction. */
export interface RecordedOutcome {
  id: string;
  status: TransactionStatus;
  providerRef: string;
  failureReason: string | null;
  settledAt: Date | null;
}

/**
 * The guarded update that records provider answers (parameters: the time, then `outcomesJson`),
 * returning the ids it recorded. The `status`/`provider_ref` condition is what makes a second
 * recording a no-op.
 */
export const RECORD_OUTCOMES_SQL = `update transactions t set status = r.status, provider_ref = r.provider_ref, failure_reason = r.failure_reason, settled_at = r.settled_at,
            claimed_until = null, updated_at = ?::timestamptz
       from jsonb_to_recordset(?::jsonb) as r(id uuid, status text, provider_ref text, failure_reason text, settled_at timestamptz)
      where t.id = r.id and t.status = 'Processing' and t.provider_ref is null
      returning t.id`;

/** The answers as `RECORD_OUTCOMES_SQL` reads them. */
export const outcomesJson = (outcomes: RecordedOutcome[]) =>
  JSON.stringify(outcomes.map((o) => ({ id: o.id, status: o.status, provider_ref: o.providerRef, failure_reason: o.failureReason, settled_at: iso(o.settledAt) })));

/**
 * Releases the claims of unconfirmed transactions whose provider call got no answer, marking
 * their outcome unknown from that instant on unless it was already (parameters: the instant,
 * their ids).
 */
export const RELEASE_UNCONFIRMED_SQL = `update transactions set claimed_until = null, outcome_unknown_at = coalesce(outcome_unknown_at, ?::timestamptz)
      where id = any(?::uuid[]) and status = 'Processing' and provider_ref is null`;

/** A refused refund whose reservation goes back to its charge. */
export interface ReleasedRefund {
  chargeId: string;
  amountMinor: number;
  refundId: string;
}

/**
 * The update giving refused refunds' reservations back to their charges, summed per charge
 * (parameter: `releasedJson`). With `recorded`, the name of a CTE returning ids, only the
 * refunds it returned give theirs back.
 */
export function releaseRefundsSql(recorded?: string): string {
  return `update transactions t set refunded_minor = greatest(0, t.refunded_minor - r.amount_minor)
       from (select x.id, sum(x.amount_minor) as amount_minor
               from jsonb_to_recordset(?::jsonb) as x(id uuid, amount_minor bigint, refund_id uuid)${recorded ? `
               join ${recorded} w on w.id = x.refund_id` : ''}
              group by x.id) r
      where t.id = r.id`;
}

/** The refunds as `releaseRefundsSql` reads them. */
export const releasedJson = (refunds: ReleasedRefund[]) => JSON.stringify(refunds.map((r) => ({ id: r.chargeId, amount_minor: r.amountMinor, refund_id: r.refundId })));

/**
 * Writes integration events to the outbox in one statement, in array order, each with its own
 * trace context or else the caller's (what `recordEvent` does one entity at a time).
 */
export async function insertEvents(db: SqlContext, events: PendingEvent[], occurredAt = new Date()): Promise<void> {
  if (events.length === 0) return;
  const traceContext = injectTraceHeaders();
  const at = occurredAt.toISOString();
  const rows = events.map((e, seq) => ({ seq, id: randomUUID(), type: e.type, merchant_id: e.merchantId, data: e.data, occurred_at: at, trace_context: e.traceContext ?? null }));
  await queryRows(
    db,
    `insert into outbox (id, type, merchant_id, data, occurred_at, trace_context)
     select e.id, e.type, e.merchant_id, e.data, e.occurred_at, coalesce(e.trace_context, ?::jsonb)
       from jsonb_to_recordset(?::jsonb) as e(seq int, id uuid, type text, merchant_id uuid, data jsonb, occurred_at timestamptz, trace_context jsonb)
      order by e.seq`,
    [JSON.stringify(traceContext), JSON.stringify(rows)],
  );
}
