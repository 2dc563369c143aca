import { instantOfRow } from '@billing/service-runtime';
import { Subscription } from './subscription.js';

/** Every column of `subscriptions`, in the order `subscriptionOfRow` reads them. */
export const SUBSCRIPTION_COLUMNS = `id, merchant_id, member_id, plan_id, payment_method_id, own_method_only, status, current_period_start, current_period_end, next_billing_at,
  billing_anchor, cancel_at_period_end, paused_at, resume_at, cancelled_at, dunning_period_start, dunning_started_at, retry_count, claimed_until, created_at, updated_at`;

/**
 * The compare-and-swap of an optimistic write of subscriptions, as a CTE body: the ids of the
 * subscriptions in recordset `c` (with `id` and `read`, the row's `to_jsonb` as read) still as
 * read, locked in id order, as every writer of subscriptions locks them, so it cannot deadlock; a
 * row changed meanwhile is rechecked once locked and left out. `ids`: the parameter holding
 * their ids, which keeps the compare on the primary key (joined to the recordset alone, the
 * planner scanned the whole table, taking `to_jsonb` of every row).
 */
export const unchangedSubscriptionsSql = (ids: string) => `select s.id from subscriptions s join c on c.id = s.id
          where s.id = any(${ids}::uuid[]) and to_jsonb(s) = c.read
          order by s.id
            for update of s`;

/**
 * The subscriptions whose ids parameter `ids` holds, each as its row (`sub`, `to_jsonb`) with its
 * plan's schedule (`plan_interval`, `plan_interval_count`) and whether a charge of it has no
 * provider answer recorded (`charge_unanswered`: in flight, or its outcome unknown until a
 * billing run reconciles it), in id order; with `lock`, row-locked in that order, as every writer
 * of subscriptions locks them.
 */
export const subscriptionsWithPlansSql = (ids: string, opts: { lock: boolean }) => `select to_jsonb(s) as sub, p.billing_interval as plan_interval, p.interval_count as plan_interval_count,
              exists (select 1 from transactions t where t.subscription_id = s.id and t.kind = 'Charge' and t.status = 'Processing' and t.provider_ref is null) as charge_unanswered
         from subscriptions s left join plans p on p.id = s.plan_id
        where s.id = any(${ids}::uuid[])
        order by s.id${opts.lock ? '\n          for update of s' : ''}`;

/** A `subscriptions` row as the pool's driver returns it (timestamps as text; the ORM converts them for its entities). */
export interface SubscriptionRow {
  id: string;
  merchant_id: string;
  member_id: string;
  plan_id: string;
  payment_method_id: string | null;
  own_method_only: boolean;
  status: Subscription['status'];
  current_period_start: string;
  current_period_end: string;
  next_billing_at: string | null;
  billing_anchor: string;
  cancel_at_period_end: boolean;
  paused_at: string | null;
  resume_at: string | null;
  cancelled_at: string | null;
  dunning_period_start: string | null;
  dunning_started_at: string | null;
  retry_count: number;
  claimed_until: string | null;
  created_at: string;
  updated_at: string;
}

const instant = (v: Date | string | null): Date | null => (v === null ? null : instantOfRow(v));

/** The aggregate of a row read by hand-written SQL, detached from any unit of work. */
export function subscriptionOfRow(r: SubscriptionRow): Subscription {
  return Object.assign(new Subscription(), {
    id: r.id,
    merchantId: r.merchant_id,
    memberId: r.member_id,
    planId: r.plan_id,
    paymentMethodId: r.payment_method_id,
    ownMethodOnly: r.own_method_only,
    status: r.status,
    currentPeriodStart: instant(r.current_period_start)!,
    currentPeriodEnd: instant(r.current_period_end)!,
    nextBillingAt: instant(r.next_billing_at),
    billingAnchor: instant(r.billing_anchor)!,
    cancelAtPeriodEnd: r.cancel_at_period_end,
    pausedAt: instant(r.paused_at),
    resumeAt: instant(r.resume_at),
    cancelledAt: instant(r.cancelled_at),
    dunningPeriodStart: instant(r.dunning_period_start),
    dunningStartedAt: instant(r.dunning_started_at),
    retryCount: r.retry_count,
    claimedUntil: instant(r.claimed_until),
    createdAt: instant(r.created_at)!,
    updatedAt: instant(r.updated_at)!,
  });
}
