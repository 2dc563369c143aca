import { z } from 'zod';
import { DateTime, Uuid } from './common.js';
import type { EventType } from './event-types.js';
import { MemberCreatedEvent } from './members.js';
import { OnboardingCompletedEvent } from './onboarding.js';
import { PaymentMethodAddedEvent } from './payment-methods.js';
import { SubscriptionEvent } from './subscriptions.js';

/** `data` of `checkout.completed`: what a completed hosted checkout created. */
export const CheckoutCompletedEvent = z
  .object({
    /** The checkout session (or invitation) that was completed. */
    sessionId: Uuid.optional(),
    memberId: Uuid,
    paymentMethodId: Uuid,
    /** The subscription the checkout created; receivers store it and create no other. */
    subscriptionId: Uuid,
    planId: Uuid.optional(),
    /** The customer's email, as entered at checkout. */
    email: z.string().optional(),
    /** The customer account ensured for the email (unclaimed when it was new). */
    customerAccountId: Uuid.optional(),
    firstName: z.string().nullish(),
    lastName: z.string().nullish(),
    completedAt: DateTime.optional(),
  })
  .meta({ id: 'CheckoutCompletedEvent', description: 'What a completed hosted checkout created. `subscriptionId` is the subscription the checkout made; do not create another.' });

/** `data` of `transaction.*`: the transaction as `GET /api/Transactions/{id}` shows it after the change. */
export const TransactionEvent = z
  .object({
    id: Uuid,
    /** The same as `id` (sent since the first version; consumers may read either). */
    transactionId: Uuid,
    merchantId: Uuid,
    memberId: Uuid,
    subscriptionId: Uuid.nullable(),
    paymentMethodId: Uuid.nullable(),
    kind: z.enum(['Charge', 'Refund']),
    /** Decimal in major units. */
    amount: z.number(),
    currency: z.string(),
    status: z.enum(['Processing', 'Settled', 'Failed']),
    failureReason: z.string().nullable(),
    attempt: z.number().int(),
    originalTransactionId: Uuid.nullable(),
    occurredAt: DateTime,
    settledAt: DateTime.nullable(),
  })
  .meta({ id: 'TransactionEvent', description: 'The transaction after the change (decimal amounts in major units).' });

/** `data` of `fee_statement.*`: the statement after the change. */
export const FeeStatementEvent = z
  .object({
    id: Uuid,
    /** The same as `id` (sent since the first version; consumers may read either). */
    statementId: Uuid,
    merchantId: Uuid,
    reference: z.string(),
    periodStart: DateTime,
    periodEnd: DateTime,
    status: z.enum(['Draft', 'Finalised', 'Paid']),
    currency: z.string(),
    totalFees: z.number(),
    totalNet: z.number(),
    transactionCount: z.number().int(),
    finalisedAt: DateTime.nullable(),
    paidAt: DateTime.nullable(),
    /** As the statement's reads give it: '' until pay stores one (null in events sent before 2026-11-25). */
    paymentReference: z.string().nullable(),
  })
  .meta({ id: 'FeeStatementEvent', description: 'The fee statement after the change (decimal amounts in major units).' });

/**
 * The schema of `data` for every webhook event type: one entry per type, so a new type without a
 * payload schema does not compile. The webhook body is `WebhookPayload` with this as `data`.
 */
export const WEBHOOK_EVENT_DATA: Record<EventType, z.ZodType> = {
  'checkout.completed': CheckoutCompletedEvent,
  'member.created': MemberCreatedEvent,
  'payment_method.added': PaymentMethodAddedEvent,
  'subscription.created': SubscriptionEvent,
  'subscription.paused': SubscriptionEvent,
  'subscription.resumed': SubscriptionEvent,
  'subscription.cancelled': SubscriptionEvent,
  'subscription.past_due': SubscriptionEvent,
  'subscription.recovered': SubscriptionEvent,
  'transaction.succeeded': TransactionEvent,
  'transaction.failed': TransactionEvent,
  'transaction.refunded': TransactionEvent,
  'onboarding.completed': OnboardingCompletedEvent,
  'fee_statement.finalised': FeeStatementEvent,
  'fee_statement.paid': FeeStatementEvent,
};

/**
 * The current version of each event type's `data` schema, stamped on every published envelope.
 * Within a version, changes are additive only (no field removed, retyped, or newly required of
 * old events); anything else is a new version, announced before producers send it (README,
 * Operations). `event-schemas/<type>.json` keeps every version's JSON Schema, and the
 * compatibility test holds the schemas to these rules.
 */
export const EVENT_VERSIONS: Record<EventType, number> = {
  'checkout.completed': 1,
  'member.created': 1,
  'payment_method.added': 1,
  'subscription.created': 1,
  'subscription.paused': 1,
  'subscription.resumed': 1,
  'subscription.cancelled': 1,
  'subscription.past_due': 1,
  'subscription.recovered': 1,
  'transaction.succeeded': 1,
  'transaction.failed': 1,
  'transaction.refunded': 1,
  'onboarding.completed': 1,
  'fee_statement.finalised': 1,
  'fee_statement.paid': 1,
};

/** The version a published event of `type` carries (1 for types without a catalogued schema). */
export function eventVersion(type: string): number {
  return (EVENT_VERSIONS as Record<string, number>)[type] ?? 1;
}

/** What each webhook event type means, for the API reference. */
export const WEBHOOK_EVENT_SUMMARIES: Record<EventType, string> = {
  'checkout.completed': 'A hosted checkout session was completed',
  'member.created': 'A member was created',
  'payment_method.added': 'A payment method was added to a member',
  'subscription.created': 'A subscription was created',
  'subscription.paused': 'A subscription was paused',
  'subscription.resumed': 'A subscription was resumed',
  'subscription.cancelled': 'A subscription was cancelled',
  'subscription.past_due': 'A charge of a subscription failed: it is PastDue and its retries are scheduled',
  'subscription.recovered': 'A retry of a PastDue subscription collected its owed period (settled, or a bank debit processing): it is Active again',
  'transaction.succeeded': 'A charge settled (a bank debit when its settlement window ends; a settled refund sends transaction.refunded)',
  'transaction.failed': 'A charge or a refund failed (data.kind says which; a failed refund\'s amount is refundable again)',
  'transaction.refunded': 'A refund of a charge settled (its data is the Refund transaction)',
  'onboarding.completed': 'An invited customer completed onboarding',
  'fee_statement.finalised': 'A fee statement was finalised',
  'fee_statement.paid': 'A fee statement was paid',
};
