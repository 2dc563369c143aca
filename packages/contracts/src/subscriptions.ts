import { z } from 'zod';
import { DateTime, IsoDate, PageQuery, Uuid } from './common.js';

/**
 * Active → Paused (pause) → Active (resume); Active → PastDue (failed charge, billing run);
 * any but Cancelled → Cancelled (cancel, or the billing run's terminal action). Nothing leaves
 * Cancelled. A subscription that is not Cancelled is "live": at most one per member and plan.
 */
export const SUBSCRIPTION_STATUSES = ['Active', 'Paused', 'PastDue', 'Cancelled'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

export const Subscription = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    memberId: Uuid,
    planId: Uuid,
    paymentMethodId: Uuid.nullable(),
    status: z.enum(SUBSCRIPTION_STATUSES),
    currentPeriodStart: DateTime,
    currentPeriodEnd: DateTime,
    /** When the next charge is due (billing in advance); null once Cancelled. */
    nextBillingAt: DateTime.nullable(),
    cancelAtPeriodEnd: z.boolean(),
    pausedAt: DateTime.nullable(),
    resumeAt: DateTime.nullable(),
    cancelledAt: DateTime.nullable(),
    createdAt: DateTime,
    updatedAt: DateTime,
  })
  .meta({ id: 'Subscription' });
export type Subscription = z.infer<typeof Subscription>;

/** A date-time, or a calendar date (`2026-01-31`, meaning 00:00 UTC). */
/** A calendar date or a date-time; one that is neither says what it must be (a union's own message is "Invalid input"). */
export const DateOrDateTime = z.union([DateTime, IsoDate], { error: 'Must be an ISO 8601 date (YYYY-MM-DD) or date-time with an offset, in the years 0001 to 9999.' });

export const CreateSubscriptionRequest = z
  .object({
    merchantId: Uuid,
    memberId: Uuid,
    planId: Uuid,
    paymentMethodId: Uuid.nullish(),
    startDate: DateOrDateTime.nullish(),
  })
  .meta({ id: 'CreateSubscriptionRequest' });
export type CreateSubscriptionRequest = z.infer<typeof CreateSubscriptionRequest>;

export const PauseSubscriptionRequest = z
  .object({ id: Uuid.nullish(), merchantId: Uuid.nullish(), resumeAt: DateOrDateTime.nullish() })
  .meta({ id: 'PauseSubscriptionRequest' });
export type PauseSubscriptionRequest = z.infer<typeof PauseSubscriptionRequest>;

export const ResumeSubscriptionRequest = z.object({ id: Uuid.nullish(), merchantId: Uuid.nullish() }).meta({ id: 'ResumeSubscriptionRequest' });

export const CancelSubscriptionRequest = z
  .object({ id: Uuid.nullish(), merchantId: Uuid.nullish(), atPeriodEnd: z.boolean().nullish() })
  .meta({ id: 'CancelSubscriptionRequest' });
export type CancelSubscriptionRequest = z.infer<typeof CancelSubscriptionRequest>;

export const ListSubscriptionsQuery = PageQuery.extend({
  merchantId: Uuid.optional(),
  memberId: Uuid.optional(),
  planId: Uuid.optional(),
  status: z.enum(SUBSCRIPTION_STATUSES).optional(),
});

/**
 * Payload (`data`) of `subscription.created`, `.paused`, `.resumed` and `.cancelled`: the
 * subscription as it is after the change.
 */
export const SubscriptionEvent = Subscription.meta({ id: 'SubscriptionEvent' });
export type SubscriptionEvent = z.infer<typeof SubscriptionEvent>;
