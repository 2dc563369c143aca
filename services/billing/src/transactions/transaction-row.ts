import type { MikroORM } from '@mikro-orm/postgresql';
import { instantOfRow, queryPrepared } from '@billing/service-runtime';
import { Transaction, type TransactionKind, type TransactionStatus } from './transaction.js';

/** Every column of `transactions`, each prefixed with `alias` (`t.id, …`) when given. */
export function transactionColumns(alias?: string): string {
  const p = alias ? `${alias}.` : '';
  return `${p}id, ${p}merchant_id, ${p}member_id, ${p}subscription_id, ${p}payment_method_id, ${p}kind, ${p}amount_minor, ${p}currency, ${p}status,
  ${p}failure_reason, ${p}attempt, ${p}original_transaction_id, ${p}period_start, ${p}fee_minor, ${p}refunded_minor, ${p}reason, ${p}provider_ref,
  ${p}claimed_until, ${p}outcome_unknown_at, ${p}occurred_at, ${p}settled_at, ${p}created_at, ${p}updated_at`;
}

/** The column definitions of a `jsonb_to_recordset` of `rowOfTransaction` rows, in the order of `transactionColumns`. */
export const TRANSACTION_RECORDSET = `id uuid, merchant_id uuid, member_id uuid, subscription_id uuid, payment_method_id uuid, kind text,
  amount_minor bigint, currency char(3), status text, failure_reason text, attempt int, original_transaction_id uuid, period_start timestamptz,
  fee_minor bigint, refunded_minor bigint, reason text, provider_ref text, claimed_until timestamptz, outcome_unknown_at timestamptz, occurred_at timestamptz,
  settled_at timestamptz, created_at timestamptz, updated_at timestamptz`;

/**
 * A `transactions` row as the pool's driver returns it: bigints as text (node-postgres does not
 * narrow int8), instants as text (the ORM's pool parses no timestamps) or as Date.
 */
export interface TransactionRow {
  id: string;
  merchant_id: string;
  member_id: string;
  subscription_id: string | null;
  payment_method_id: string | null;
  kind: TransactionKind;
  amount_minor: string | number;
  currency: string;
  status: TransactionStatus;
  failure_reason: string | null;
  attempt: number;
  original_transaction_id: string | null;
  period_start: string | Date | null;
  fee_minor: string | number;
  refunded_minor: string | number;
  reason: string | null;
  provider_ref: string | null;
  claimed_until: string | Date | null;
  outcome_unknown_at: string | Date | null;
  occurred_at: string | Date;
  settled_at: string | Date | null;
  created_at: string | Date;
  updated_at: string | Date;
}

const instant = (v: Date | string | null): Date | null => (v === null ? null : instantOfRow(v));

/**
 * The entity of a row read by hand-written SQL, detached from any unit of work: the same
 * `Transaction` the ORM hydrates (amounts as numbers, as its `BigIntType('number')` gives them;
 * stored amounts are integer minor units within `Number.MAX_SAFE_INTEGER`).
 */
export function transactionOfRow(r: TransactionRow): Transaction {
  return Object.assign(new Transaction(), {
    id: r.id,
    merchantId: r.merchant_id,
    memberId: r.member_id,
    subscriptionId: r.subscription_id,
    paymentMethodId: r.payment_method_id,
    kind: r.kind,
    amountMinor: Number(r.amount_minor),
    currency: r.currency,
    status: r.status,
    failureReason: r.failure_reason,
    attempt: r.attempt,
    originalTransactionId: r.original_transaction_id,
    periodStart: instant(r.period_start),
    feeMinor: Number(r.fee_minor),
    refundedMinor: Number(r.refunded_minor),
    reason: r.reason,
    providerRef: r.provider_ref,
    claimedUntil: instant(r.claimed_until),
    outcomeUnknownAt: instant(r.outcome_unknown_at),
    occurredAt: instant(r.occurred_at)!,
    settledAt: instant(r.settled_at),
    createdAt: instant(r.created_at)!,
    updatedAt: instant(r.updated_at)!,
  });
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

/** A transaction as a row of a `jsonb_to_recordset(…) as r(TRANSACTION_RECORDSET)` (instants in ISO 8601). */
export function rowOfTransaction(t: Transaction) {
  return {
    id: t.id,
    merchant_id: t.merchantId,
    member_id: t.memberId,
    subscription_id: t.subscriptionId,
    payment_method_id: t.paymentMethodId,
    kind: t.kind,
    amount_minor: t.amountMinor,
    currency: t.currency,
    status: t.status,
    failure_reason: t.failureReason,
    attempt: t.attempt,
    original_transaction_id: t.originalTransactionId,
    period_start: iso(t.periodStart),
    fee_minor: t.feeMinor,
    refunded_minor: t.refundedMinor,
    reason: t.reason,
    provider_ref: t.providerRef,
    claimed_until: iso(t.claimedUntil),
    outcome_unknown_at: iso(t.outcomeUnknownAt),
    occurred_at: iso(t.occurredAt),
    settled_at: iso(t.settledAt),
    created_at: iso(t.createdAt),
    updated_at: iso(t.updatedAt),
  };
}

/** Transactions by id (lower-case UUIDs), as detached entities, in id order; one statement. */
export async function loadTransactions(orm: MikroORM, ids: readonly string[]): Promise<Transaction[]> {
  if (ids.length === 0) return [];
  // Hand-mapped: the ORM's find and hydration cost more than the statement on this hot path.
  const { rows } = await queryPrepared<TransactionRow>(orm, 'transactions_by_id', `select ${transactionColumns()} from transactions where id = any($1::uuid[]) order by id`, [ids]);
  return rows.map(transactionOfRow);
}
