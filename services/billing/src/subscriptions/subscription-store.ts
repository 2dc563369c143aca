import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError, type PlanInterval } from '@billing/contracts';
import { injectTraceHeaders } from '@billing/telemetry';
import { randomUUID } from 'node:crypto';
import type { Subscription } from './subscription.js';

/** What enrolling a member needs to know, read in one round trip. */
export interface EnrolmentFacts {
  member: { id: string; merchantId: string } | null;
  plan: { id: string; merchantId: string; isActive: boolean; interval: PlanInterval; intervalCount: number; trialDays: number } | null;
  paymentMethod: { id: string; memberId: string } | null;
}

/**
 * Create-subscription is the platform's hottest write, so its reads and its write are one
 * statement each instead of one ORM round trip per entity (3 lookups + begin/insert/insert/commit
 * before). The domain still decides: `Subscription.start` builds the aggregate and its events;
 * this module only persists them. `merchantId` empty = the platform admin (any merchant).
 */
export async function loadEnrolmentFacts(em: EntityManager, req: { merchantId: string; memberId: string; planId: string; paymentMethodId?: string }): Promise<EnrolmentFacts> {
  const scope = (alias: string) => (req.merchantId ? ` and ${alias}.merchant_id = ?` : '');
  const scopeParams = req.merchantId ? [req.merchantId.toLowerCase()] : [];
  const [row] = await em.getConnection().execute(
    `select
       (select json_build_object('id', m.id, 'merchantId', m.merchant_id) from members m where m.id = ?${scope('m')}) as member,
       (select json_build_object('id', p.id, 'merchantId', p.merchant_id, 'isActive', p.is_active, 'interval', p.billing_interval,
                                 'intervalCount', p.interval_count, 'trialDays', p.trial_days)
          from plans p where p.id = ?${scope('p')}) as plan,
       (select json_build_object('id', x.id, 'memberId', x.member_id) from payment_methods x where x.id = ?${scope('x')}) as payment_method`,
    [req.memberId.toLowerCase(), ...scopeParams, req.planId.toLowerCase(), ...scopeParams, (req.paymentMethodId ?? req.memberId).toLowerCase(), ...scopeParams],
  );
  return { member: row.member, plan: row.plan, paymentMethod: req.paymentMethodId ? row.payment_method : null };
}

/**
 * Inserts a new live subscription and its outbox events in one atomic statement. Returns false,
 * writing nothing, when the member already has a live subscription to the plan (the partial
 * unique index `subscriptions_live_unique` decides, so concurrent creates cannot both win).
 */
export async function insertLiveSubscription(em: EntityManager, sub: Subscription, events: { type: string; data: Record<string, unknown> }[]): Promise<boolean> {
  const traceContext = injectTraceHeaders();
  const outbox = events.map((e) => ({ id: randomUUID(), type: e.type, merchant_id: sub.merchantId, data: e.data, occurred_at: sub.createdAt.toISOString(), trace_context: traceContext }));
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  const [row] = await em.getConnection().execute(
    `with inserted as (
       insert into subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, status, current_period_start, current_period_end,
                                  next_billing_at, billing_anchor, cancel_at_period_end, paused_at, resume_at, cancelled_at, created_at, updated_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       on conflict (member_id, plan_id) where status <> 'Cancelled' do nothing
       returning id),
     events as (
       insert into outbox (id, type, merchant_id, data, occurred_at, trace_context)
       select e.id, e.type, e.merchant_id, e.data, e.occurred_at, e.trace_context
         from inserted, jsonb_to_recordset(?::jsonb) as e(id uuid, type text, merchant_id uuid, data jsonb, occurred_at timestamptz, trace_context jsonb)
       returning 1)
     select (select count(*) from inserted)::int as inserted, (select count(*) from events)::int as events`,
    [
      sub.id, sub.merchantId, sub.memberId, sub.planId, sub.paymentMethodId, sub.status, iso(sub.currentPeriodStart), iso(sub.currentPeriodEnd),
      iso(sub.nextBillingAt), iso(sub.billingAnchor), sub.cancelAtPeriodEnd, iso(sub.pausedAt), iso(sub.resumeAt), iso(sub.cancelledAt), iso(sub.createdAt), iso(sub.updatedAt),
      JSON.stringify(outbox),
    ],
  );
  if (row.inserted === 1 && row.events !== events.length) throw new DomainError('internal', 'outbox insert mismatch');
  return row.inserted === 1;
}
