import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import type { CallScope } from '@billing/service-runtime';
import { applyCallOutcomes, callProviderFor, recordTransactionEvents } from '../billing-runs/billing-run.js';
import { platformFee } from '../fees/platform-fee.js';
import { Merchant } from '../merchants/merchant.js';
import { findScoped } from '../merchant-scope.js';
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
}

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
async function callAndRecord(deps: CommandDeps, t: Transaction): Promise<Transaction> {
  const [outcome] = await callProviderFor(deps.orm, deps.providers, [t], 1);
  await applyCallOutcomes(deps.orm, [t], [outcome!], new Date());
  if (outcome === 'unavailable') {
    throw new DomainError(
      'provider_unavailable',
      `The payment provider did not answer; ${t.kind.toLowerCase()} ${t.id} stays Processing until the next billing run completes it with the same idempotency key. Look it up before trying again.`,
    );
  }
  if (t.kind === 'Refund' && outcome!.status === 'Failed' && outcome!.failureReason === PROVIDER_REJECTED) {
    throw new DomainError('conflict', `The payment provider refused refund ${t.id}; it is Failed (provider_rejected), nothing was refunded and its amount is refundable again.`, {
      transactionId: t.id,
      failureReason: PROVIDER_REJECTED,
    });
  }
  return deps.orm.em.fork().findOneOrFail(Transaction, { id: t.id });
}

/**
 * Retries a Failed charge with a new Charge of `attempt + 1` on the same payment method for the
 * same period (contract §7). Refused (invalid_transition) unless the charge is Failed, not yet
 * retried, and its period is still the one its subscription is collecting.
 */
export async function retryCharge(deps: CommandDeps, scope: CallScope, id: string): Promise<Transaction> {
  const retry = await deps.orm.em.fork().transactional(async (em) => {
    const failed = await findTransaction(em, scope, id, { lock: true });
    failed.assertRetryable();
    if ((await em.count(Transaction, { originalTransactionId: failed.id, kind: 'Charge' })) > 0) throw new DomainError('invalid_transition', 'This charge has already been retried; retry the latest attempt.');
    const sub = failed.subscriptionId ? await em.findOne(Subscription, { id: failed.subscriptionId }, { lockMode: 4 }) : null;
    if (sub) {
      if (sub.status !== 'Active' && sub.status !== 'PastDue') throw new DomainError('invalid_transition', `The subscription is ${sub.status}; its charges are not retried.`);
      if (sub.duePeriodStart()?.getTime() !== failed.periodStart?.getTime()) throw new DomainError('invalid_transition', 'The period of this charge has been collected since.');
      if (sub.claimedUntil && sub.claimedUntil > new Date()) throw new DomainError('invalid_transition', 'A billing run is charging this subscription right now; try again shortly.');
    }
    const merchant = await em.findOneOrFail(Merchant, { id: failed.merchantId });
    const lease = new Date(Date.now() + deps.leaseMs);
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
  });
  return callAndRecord(deps, retry);
}

/**
 * Refunds `amountMinor` (default: what is left) of a Settled charge. The amount is reserved on
 * the charge under its row lock before the provider is called, so concurrent refunds can never
 * together exceed the charge; a refund the provider refuses gives its reservation back.
 */
export async function refundCharge(deps: CommandDeps, scope: CallScope, id: string, amountMinor: number | null, reason: string | null): Promise<Transaction> {
  if (amountMinor !== null && (!Number.isSafeInteger(amountMinor) || amountMinor <= 0)) throw DomainError.field('amount', 'Must be greater than zero.');
  const refund = await deps.orm.em.fork().transactional(async (em) => {
    const charge = await findTransaction(em, scope, id, { lock: true });
    const amount = charge.reserveRefund(amountMinor);
    const t = Object.assign(new Transaction(), {
      merchantId: charge.merchantId,
      memberId: charge.memberId,
      subscriptionId: charge.subscriptionId,
      paymentMethodId: charge.paymentMethodId,
      kind: 'Refund' as const,
      amountMinor: amount,
      currency: charge.currency,
      originalTransactionId: charge.id,
      reason,
      claimedUntil: new Date(Date.now() + deps.leaseMs),
    });
    em.persist(t);
    return t;
  });
  return callAndRecord(deps, refund);
}

export { recordTransactionEvents };
