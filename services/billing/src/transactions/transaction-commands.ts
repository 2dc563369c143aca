import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { Batcher, type CallScope } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import { applyCallOutcomes, callProviderFor, type CallOutcome } from '../billing-runs/billing-run.js';
import { findScoped } from '../merchant-scope.js';
import { PROVIDER_NOT_CONFIGURED, PROVIDER_REJECTED } from '../payment-provider/payment-provider.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { Transaction } from './transaction.js';
import { TransactionReservations, type Reservation } from './transaction-reservations.js';
import { loadTransactions } from './transaction-row.js';

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

/** A transaction whose provider call is to be made, what the call needs (read while reserving), and the trace headers of its request (for its events). */
interface SubmittedCall extends Reservation {
  traceContext: Record<string, string>;
}

/** A provider call's outcome and the transaction as recorded after it (as it stands, when the provider gave no answer). */
interface CallResult {
  outcome: CallOutcome;
  recorded: Transaction;
}

/**
 * Refunds and retries (contract §7), group-committed: the requests that arrive together reserve
 * in one transaction (`TransactionReservations`), then share one round of provider calls and one
 * recording of their outcomes (`applyCallOutcomes`, as a billing run's chunk), and are answered
 * from what was recorded. Each request keeps the rules and answers it has alone: requests on
 * one charge never share a reservation batch and are decided in turn under its row lock, and
 * each gets its own error.
 */
export class TransactionCommands {
  /**
   * Refunds `amountMinor` (default: what is left) of a Settled charge. The amount is reserved
   * on the charge under its row lock before the provider is called, so concurrent refunds can
   * never together exceed the charge; a refund the provider refuses gives its reservation back.
   * Refused with nothing reserved while another refund of the charge has an unknown outcome, or
   * when the merchant's environment has no provider (`TransactionReservations.refund`).
   */
  async refund(scope: CallScope, id: string, amountMinor: number | null, reason: string | null): Promise<Transaction> {
    if (amountMinor !== null && (!Number.isSafeInteger(amountMinor) || amountMinor <= 0)) throw DomainError.field('amount', 'Must be greater than zero.');
    return this.callAndRecord(await this.reservations.refund({ scope, id, amountMinor, reason, startedAt: new Date() }));
  }

  /**
   * Retries a Failed charge for the same period (contract §7) against the member's payment
   * methods as they are now, in `chargeOrder` (the subscription's own, then by rank, those that failed the period last) until one
   * succeeds (contract §10, as a billing run's attempt falls back): each try is its own Charge, a retry of the one before it (`attempt + 1`,
   * `originalTransactionId` = the charge it retries, the first the failed charge), reserved and
   * called as a retry alone is, so a concurrent retry of any of them is refused as usual and
   * nothing is charged twice. Answers the charge that settled or is processing, or, when every
   * method declined, the last Failed one. Refused (invalid_transition) unless the charge is
   * Failed, not yet retried, and its period is still the one its subscription is collecting;
   * a conflict, with nothing charged, when the member has no payment method.
   */
  async retry(scope: CallScope, id: string): Promise<Transaction> {
    let reservation = await this.reservations.retry({ scope, id });
    const tried: string[] = [];
    for (;;) {
      tried.push(reservation.t.paymentMethodId!);
      const recorded = await this.callAndRecord(reservation);
      if (recorded.status !== 'Failed') return recorded;
      try {
        reservation = await this.reservations.retry({ scope, id: recorded.id, tried });
      } catch (e) {
        // No method left untried, or the period has moved on meanwhile (a billing run's claim or
        // charge, a concurrent retry of the declined charge): the decline is the answer.
        if (e instanceof DomainError) return recorded;
        throw e;
      }
    }
  }

  private readonly reservations: TransactionReservations;

  constructor(private readonly deps: CommandDeps) {
    this.reservations = new TransactionReservations(deps.orm, deps.providers, deps.leaseMs);
  }

  /**
   * The provider calls of freshly committed `Processing` transactions, made and recorded for a
   * batch at once. Charges of one subscription never share a batch: recording a charge's
   * outcome moves its subscription on, which the next one must see.
   */
  private readonly calls = new Batcher<SubmittedCall, CallResult>(
    async (batch) => {
      const txns = batch.map((c) => c.t);
      const known = {
        merchants: new Map(batch.map((c) => [c.t.merchantId, c.merchant])),
        originals: new Map(batch.flatMap((c) => (c.original ? [[c.original.id, c.original] as const] : []))),
        // A retry's payment method as its reservation read it: the call makes no read of its own.
        methods: new Map(batch.flatMap((c) => (c.method ? [[c.method.id, c.method] as const] : []))),
      };
      const outcomes = await callProviderFor(this.deps.orm, this.deps.providers, txns, this.deps.concurrency, known, 'first');
      const { recorded } = await applyCallOutcomes(this.deps.orm, txns, outcomes, new Date(), batch.map((c) => c.traceContext));
      // `applyCallOutcomes` applied what it recorded to the transactions; only those confirmed
      // meanwhile (by a reconciling billing run) are read, as that run recorded them.
      const unanswered = txns.filter((t, i) => outcomes[i] !== 'unavailable' && !recorded.has(t.id)).map((t) => t.id);
      const confirmed = new Map((await loadTransactions(this.deps.orm, unanswered)).map((t) => [t.id, t]));
      return txns.map((t, i) => ({ outcome: outcomes[i]!, recorded: confirmed.get(t.id) ?? t }));
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
   * refused so is a Failed charge, answered like a decline. A call that could not be sent (the
   * merchant's environment lost its provider after the reservation: `provider_not_configured`)
   * is recorded Failed, a refund's reservation released, and answered provider_unavailable
   * saying nothing was sent.
   */
  private async callAndRecord(reservation: Reservation): Promise<Transaction> {
    const { t } = reservation;
    const { outcome, recorded } = await this.calls.submit({ ...reservation, traceContext: injectTraceHeaders() });
    if (outcome === 'unavailable') {
      throw new DomainError(
        'provider_unavailable',
        `The payment provider did not answer; ${t.kind.toLowerCase()} ${t.id} stays Processing until a billing run repeats the call with the same idempotency key and records the answer (the first run once this request's claim on it has lapsed, about two minutes by default). Look it up before trying again.`,
      );
    }
    if (outcome.status === 'Failed' && outcome.failureReason === PROVIDER_NOT_CONFIGURED) {
      // The merchant's environment lost its provider after the reservation: nothing was sent.
      throw new DomainError(
        'provider_unavailable',
        `No payment provider is configured for this merchant's environment; ${t.kind.toLowerCase()} ${t.id} is Failed (${PROVIDER_NOT_CONFIGURED}) and nothing was ${t.kind === 'Refund' ? 'refunded' : 'charged'}, so trying again is safe once one is.`,
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

