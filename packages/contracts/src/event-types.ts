/** Every integration event type the platform emits, named `<aggregate>.<past-tense verb>`. */
export const EVENT_TYPES = [
  'checkout.completed',
  'member.created',
  'payment_method.added',
  'subscription.created',
  'subscription.paused',
  'subscription.resumed',
  'subscription.cancelled',
  'subscription.past_due',
  'subscription.recovered',
  'transaction.succeeded',
  'transaction.failed',
  'transaction.refunded',
  'onboarding.completed',
  'fee_statement.finalised',
  'fee_statement.paid',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
