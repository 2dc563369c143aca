import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { Batcher, GroupWrite, queryRows, type CallScope } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import { applyCallOutcomes, callProviderFor, type CallOutcome } from '../billing-runs/billing-run.js';
import { platformFee } from '../fees/platform-fee.js';
import { Merchant } from '../merchants/merchant.js';
import { findManyById, findScoped, pickScoped } from '../merchant-scope.js';
import { PROVIDER_REJECTED } from '../payment-provider/payment-provider.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { Subscription } from '../subscriptions/subscription.js';
import { Transaction } from './transaction.js';

export function findTransaction(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Transaction> {
  return findScoped(em, Transaction, scope, id, 'Transaction', opts);
}

export interface CommandDeps {
  orm: MikroORM;
  providers: PaymentProviders;
  leaseMs: number;
  /** Provider calls in flight per batch of refunds and retries (as a billing run's worker). */
  concurrency: number;
}

interface RefundRequest {
  scope: CallScope;
  id: string;
  amountMinor: number | null;
  reason: string | null;
}

interface RetryRequest {
  scope: CallScope;
  id: string;
}

/** A transaction whose provider call is to be made, and the trace headers of its request (for its events). */
interface SubmittedCall {
  t: Transaction;
  traceContext: Record<string, string>;
}

/** A provider call's outcome and the transaction as recorded after it. */
interface CallResult {
  outcome: CallOutcome;
  recorded: Transaction;
}

interface RetryLoad {
  failed: Map<string, Transaction>;
  /** Ids of the failed charges that have a retry already. */
  retried: Set<string>;
  subs: Map<string, Subscription>;
  merchants: Map<string, Merchant>;
}

/**
 * Refunds and retries (contract §7), group-committed: the requests that arrive together reserve
 * in one transaction (`GroupWrite`), then share one round of provider calls and one recording
 * of their outcomes (`applyCallOutcomes`, as a billing run's chunk), and are answered from one
 * read of what was recorded. Each request keeps the rules and answers it has alone: requests on
 * one charge never share a reservation batch and are decided in turn under its row lock, and
 * each gets its own error.
 */
export class TransactionCommands {
  /**
   * Refunds `amountMinor` (default: what is left) of a Settled charge. The amount is reserved
   * on the charge under its row lock before the provider is called, so concurrent refunds can
   * never together exceed the charge; a refund the provider refuses gives its reservation back.
   */
  async refund(scope: CallScope, id: string, amountMinor: number | null, reason: string | null): Promise<Transaction> {
    if (amountMinor !== null && (!Number.isSafeInteger(amountMinor) || amountMinor <= 0)) throw DomainError.field('amount', 'Must be greater than zero.');
    return this.callAndRecord(await this.refunds.run({ scope, id, amountMinor, reason }));
  }

  /**
   * Retries a Failed charge with a new Charge of `attempt + 1` on the same payment method for
   * the same period (contract §7). Refused (invalid_transition) unless the charge is Failed, not
   * yet retried, and its period is still the one its subscription is collecting.
   */
  async retry(scope: CallScope, id: string): Promise<Transaction> {
    return this.callAndRecord(await this.retries.run({ scope, id }));
  }

  /** Reserves refunds (`refund`). Two refunds of one charge never share a batch: the second is decided after the first committed. */
  private readonly refunds: GroupWrite<RefundRequest, Transaction>;

  /**
   * Reserves retries (`retry`). Two retries of one charge never share a batch. Retries of two
   * charges of one subscription may: the first claims the subscription (on the entity both
   * see), which refuses the second, as when they run one after the other.
   */
  private readonly retries: GroupWrite<RetryRequest, Transaction>;

  constructor(private readonly deps: CommandDeps) {
    const keyOf = (r: { id: string }) => r.id.toLowerCase();
    this.refunds = new GroupWrite(
      deps.orm,
      { load: (em, items: readonly RefundRequest[]) => findManyById(em, Transaction, items.map((r) => r.id), { lock: true }), apply: (em, r, charges) => this.reserveRefund(em, r, charges) },
      { keyOf },
    );
    this.retries = new GroupWrite(deps.orm, { load: (em, items: readonly RetryRequest[]) => this.loadRetries(em, items), apply: (em, r, loaded) => this.reserveRetry(em, r, loaded) }, { keyOf });
  }

  private reserveRefund(em: EntityManager, r: RefundRequest, charges: Map<string, Transaction>): Transaction {
    const charge = pickScoped(charges, r.scope, r.id, 'Transaction');
    const amount = charge.reserveRefund(r.amountMinor);
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
      claimedUntil: new Date(Date.now() + this.deps.leaseMs),
    });
    em.persist(t);
    return t;
  }

  private async loadRetries(em: EntityManager, items: readonly RetryRequest[]): Promise<RetryLoad> {
    // Charges, then subscriptions: the lock order of a retry run alone.
    const failed = await findManyById(em, Transaction, items.map((r) => r.id), { lock: true });
    const ids = [...failed.keys()];
    const retried = ids.length
      ? new Set((await queryRows<{ id: string }>(em, `select distinct original_transaction_id as id from transactions where kind = 'Charge' and original_transaction_id = any(?::uuid[])`, [ids])).map((r) => r.id))
      : new Set<string>();
    const subs = await findManyById(em, Subscription, [...failed.values()].flatMap((t) => t.subscriptionId ?? []), { lock: true });
    const merchants = await findManyById(em, Merchant, [...failed.values()].map((t) => t.merchantId));
    return { failed, retried, subs, merchants };
  }

  private reserveRetry(em: EntityManager, r: RetryRequest, { failed: loaded, retried, subs, merchants }: RetryLoad): Transaction {
    const failed = pickScoped(loaded, r.scope, r.id, 'Transaction');
    failed.assertRetryable();
    if (retried.has(failed.id)) throw new DomainError('invalid_transition', 'This charge has already been retried; retry the latest attempt.');
    const sub = failed.subscriptionId ? subs.get(failed.subscriptionId) : undefined;
    if (sub) {
      if (sub.status !== 'Active' && sub.status !== 'PastDue') throw new DomainError('invalid_transition', `The subscription is ${sub.status}; its charges are not retried.`);
      if (sub.duePeriodStart()?.getTime() !== failed.periodStart?.getTime()) throw new DomainError('invalid_transition', 'The period of this charge has been collected since.');
      if (sub.claimedUntil && sub.claimedUntil > new Date()) throw new DomainError('invalid_transition', 'A billing run is charging this subscription right now; try again shortly.');
    }
    const merchant = merchants.get(failed.merchantId)!;
    const lease = new Date(Date.now() + this.deps.leaseMs);
    const t = Object.assign(new Transaction(), {
      merchantId: failed.merchantId,
      memberId: failed.memberId,
      subscriptionId: failed.subscriptionId,
      paymentMethodId: failed.paymentMethodId,
      kind: 'Charge' as const,
      amountMinor: failed.amountMinor,
      currency: failed.currency,
      attempt: failed.attempt + 1,
      originalTransactionId: failed.id,
      periodStart: failed.periodStart,
      feeMinor: platformFee(failed.amountMinor, merchant.feeTerms()),
      claimedUntil: lease,
    });
    if (sub) sub.claimedUntil = lease;
    em.persist(t);
    return t;
  }

  /**
   * The provider calls of freshly committed `Processing` transactions, made and recorded for a
   * batch at once. Charges of one subscription never share a batch: recording a charge's
   * outcome moves its subscription on, which the next one must see.
   */
  private readonly calls = new Batcher<SubmittedCall, CallResult>(
    async (batch) => {
      const txns = batch.map((c) => c.t);
      const outcomes = await callProviderFor(this.deps.orm, this.deps.providers, txns, this.deps.concurrency);
      await applyCallOutcomes(this.deps.orm, txns, outcomes, new Date(), batch.map((c) => c.traceContext));
      const recorded = new Map((await this.deps.orm.em.fork().find(Transaction, { id: { $in: txns.map((t) => t.id) } })).map((t) => [t.id, t]));
      return txns.map((t, i) => ({ outcome: outcomes[i]!, recorded: recorded.get(t.id)! }));
    },
    // More batches in flight than a plain write's: a batch waits for its slowest provider call (up to the
    // provider timeout), and one slow merchant's calls should not hold up everyone else's for long.
    { keyOf: ({ t }) => (t.kind === 'Charge' && t.subscriptionId ? `subscription:${t.subscriptionId}` : t.id), maxInFlight: 8 },
  );

  /**
   * Makes the provider call a freshly committed `Processing` transaction stands for and records
   * the answer. When the provider gives no answer (down, failing, or past the timeout, when it
   * may well have acted) the transaction stays `Processing` and unconfirmed, a refund keeping its
   * amount reserved, and the caller gets provider_unavailable naming it: the outcome is unknown
   * until the next billing run repeats the call with the same idempotency key and records the
   * provider's one outcome. So the call is neither lost nor made twice.
   *
   * A refund the provider refused for good (`provider_rejected`: nothing was refunded) is
   * recorded Failed, its reservation released, and answered as a conflict naming it; a charge
   * refused so is a Failed charge, answered like a decline.
   */
  private async callAndRecord(t: Transaction): Promise<Transaction> {
    const { outcome, recorded } = await this.calls.submit({ t, traceContext: injectTraceHeaders() });
    if (outcome === 'unavailable') {
      throw new DomainError(
        'provider_unavailable',
        `The payment provider did not answer; ${t.kind.toLowerCase()} ${t.id} stays Processing until the next billing run completes it with the same idempotency key. Look it up before trying again.`,
      );
    }
    if (t.kind === 'Refund' && outcome.status === 'Failed' && outcome.failureReason === PROVIDER_REJECTED) {
      throw new DomainError('conflict', `The payment provider refused refund ${t.id}; it is Failed (provider_rejected), nothing was refunded and its amount is refundable again.`, {
        transactionId: t.id,
        failureReason: PROVIDER_REJECTED,
      });
    }
    return recorded;
  }
}

