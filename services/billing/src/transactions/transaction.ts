import { randomUUID } from 'node:crypto';
import { BigIntType, EntitySchema } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { formatDecimal } from '@billing/money';

export type TransactionKind = 'Charge' | 'Refund';
export type TransactionStatus = 'Processing' | 'Settled' | 'Failed';
export type TransactionEventType = 'transaction.succeeded' | 'transaction.failed' | 'transaction.refunded';

/**
 * Money moved (or attempted) through the payment provider: a `Charge` of a member's payment
 * method, or a `Refund` of part or all of a settled charge. Amounts are integer minor units.
 * The id is the provider idempotency key of the call, so a repeated call never moves money twice.
 *
 *   Charge:  Processing ──provider settles──▶ Settled
 *            Processing ──declined / settlement fails──▶ Failed
 *   Refund:  Processing ──provider accepts──▶ Settled      (refused ──▶ Failed)
 *
 * `Processing` without `providerRef` means the provider call has not been confirmed yet (the
 * caller crashed or the provider did not answer); the next billing run reconciles it by
 * repeating the call with the same key.
 */
export class Transaction {
  id: string = randomUUID();
  merchantId!: string;
  memberId!: string;
  subscriptionId: string | null = null;
  paymentMethodId: string | null = null;
  kind!: TransactionKind;
  amountMinor!: number;
  currency!: string;
  status: TransactionStatus = 'Processing';
  failureReason: string | null = null;
  attempt = 1;
  originalTransactionId: string | null = null;
  /** The subscription period a charge pays for. */
  periodStart: Date | null = null;
  /** Platform fee on a charge (minor units), fixed when it is made; 0 on refunds. */
  feeMinor = 0;
  /** Charges: total of their non-failed refunds. */
  refundedMinor = 0;
  reason: string | null = null;
  /** The provider's id of the charge or refund, once the provider confirmed the call. */
  providerRef: string | null = null;
  claimedUntil: Date | null = null;
  /**
   * When a provider call of this `Processing` transaction was first known to have had no answer
   * (its request answered provider_unavailable, or a billing run took it up to reconcile): from
   * then on its outcome is unknown until a run records it. Null while its first call is in flight.
   */
  outcomeUnknownAt: Date | null = null;
  occurredAt: Date = new Date();
  settledAt: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  /** Events caused since load (not persisted). */
  private pending?: TransactionEventType[];

  /** How much of a settled charge can still be refunded. */
  refundable(): number {
    return this.kind === 'Charge' && this.status === 'Settled' ? this.amountMinor - this.refundedMinor : 0;
  }

  /**
   * Reserves `amountMinor` (default: all that is left) of this settled charge for a refund.
   * Callers hold the charge's row lock, so concurrent refunds cannot together exceed the charge.
   */
  reserveRefund(amountMinor: number | null): number {
    if (this.kind !== 'Charge') throw new DomainError('invalid_transition', 'Only a charge can be refunded.');
    if (this.status !== 'Settled') throw new DomainError('invalid_transition', `Only a Settled charge can be refunded; this one is ${this.status}.`);
    const left = this.refundable();
    const amount = amountMinor ?? left;
    if (left <= 0) throw new DomainError('invalid_transition', 'The charge has been refunded in full.');
    if (amount > left) throw new DomainError('invalid_transition', `The refund exceeds the refundable amount of the charge (${formatDecimal(left, this.currency)} ${this.currency} left).`);
    this.refundedMinor += amount;
    return amount;
  }

  /** A failed refund gives its reservation back to the charge. */
  releaseRefund(amountMinor: number): void {
    this.refundedMinor = Math.max(0, this.refundedMinor - amountMinor);
  }

  /** Whether a failed charge may be retried by hand (a later attempt supersedes it). */
  assertRetryable(): void {
    if (this.kind !== 'Charge' || this.status !== 'Failed') throw new DomainError('invalid_transition', `Only a Failed charge can be retried; this one is a ${this.status} ${this.kind}.`);
  }

  /** The provider's answer to the call: Settled, Processing (bank debit in its window) or Failed. */
  applyOutcome(outcome: { status: TransactionStatus; providerRef: string; failureReason: string | null }, at: Date): void {
    if (this.status !== 'Processing') return;
    this.providerRef = outcome.providerRef;
    this.claimedUntil = null;
    this.updatedAt = at;
    if (outcome.status === 'Settled') {
      this.status = 'Settled';
      this.settledAt = at;
      this.record(this.kind === 'Refund' ? 'transaction.refunded' : 'transaction.succeeded');
    } else if (outcome.status === 'Failed') {
      this.status = 'Failed';
      this.failureReason = outcome.failureReason ?? 'failed';
      this.record('transaction.failed');
    }
  }

  pullEvents(): TransactionEventType[] {
    const e = this.pending ?? [];
    this.pending = [];
    return e;
  }

  private record(e: TransactionEventType): void {
    (this.pending ??= []).push(e);
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      memberId: this.memberId,
      subscriptionId: this.subscriptionId ?? undefined,
      paymentMethodId: this.paymentMethodId ?? undefined,
      kind: this.kind,
      amountMinor: this.amountMinor,
      currency: this.currency,
      status: this.status,
      failureReason: this.failureReason ?? undefined,
      attempt: this.attempt,
      originalTransactionId: this.originalTransactionId ?? undefined,
      occurredAt: this.occurredAt.toISOString(),
      settledAt: this.settledAt?.toISOString(),
      feeMinor: this.feeMinor,
      refundedMinor: this.refundedMinor,
    };
  }
}

/** The payload of transaction events: ids a receiver needs, and amounts in minor units and major units. */
export function transactionEventData(t: { id: string; merchantId: string; memberId: string; subscriptionId: string | null; paymentMethodId: string | null; kind: string; amountMinor: number; currency: string; status: string; failureReason: string | null; attempt: number; originalTransactionId: string | null; occurredAt: Date; settledAt: Date | null }, toMajor: (minor: number, currency: string) => number) {
  return {
    id: t.id,
    transactionId: t.id,
    merchantId: t.merchantId,
    memberId: t.memberId,
    subscriptionId: t.subscriptionId,
    paymentMethodId: t.paymentMethodId,
    kind: t.kind,
    amount: toMajor(t.amountMinor, t.currency),
    currency: t.currency,
    status: t.status,
    failureReason: t.failureReason,
    attempt: t.attempt,
    originalTransactionId: t.originalTransactionId,
    occurredAt: t.occurredAt.toISOString(),
    settledAt: t.settledAt?.toISOString() ?? null,
  };
}

export const TransactionSchema = new EntitySchema<Transaction>({
  class: Transaction,
  tableName: 'transactions',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    memberId: { type: 'uuid' },
    subscriptionId: { type: 'uuid', nullable: true },
    paymentMethodId: { type: 'uuid', nullable: true },
    kind: { type: 'string' },
    amountMinor: { type: new BigIntType('number') },
    currency: { type: 'string', columnType: 'char(3)' },
    status: { type: 'string' },
    failureReason: { type: 'string', nullable: true },
    attempt: { type: 'integer' },
    originalTransactionId: { type: 'uuid', nullable: true },
    periodStart: { type: 'Date', columnType: 'timestamptz', nullable: true },
    feeMinor: { type: new BigIntType('number') },
    refundedMinor: { type: new BigIntType('number') },
    reason: { type: 'string', nullable: true },
    providerRef: { type: 'string', nullable: true },
    claimedUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    outcomeUnknownAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    occurredAt: { type: 'Date', columnType: 'timestamptz' },
    settledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
