import type { MikroORM } from '@mikro-orm/postgresql';
import { type PlanInterval } from '@billing/contracts';
import { Batcher, queryPrepared } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import { randomUUID } from 'node:crypto';
import type { Subscription } from './subscription.js';

/** What enrolling a member needs to know. */
export interface EnrolmentFacts {
  member: { id: string; merchantId: string } | null;
  plan: { id: string; merchantId: string; isActive: boolean; interval: PlanInterval; intervalCount: number; trialDays: number } | null;
  paymentMethod: { id: string; memberId: string } | null;
}

/** Enrolment inside one merchant (a merchant scope): only that merchant's rows are facts. Ids are UUIDs (checked by the caller). */
export interface EnrolmentRequest {
  merchantId: string;
  memberId: string;
  planId: string;
  paymentMethodId?: string;
}

interface NewSubscription {
  sub: Subscription;
  events: { type: string; data: Record<string, unknown> }[];
  traceContext: Record<string, string>;
}

/** How an insert ended: written, refused by a live subscription of the member to the plan, or broken. */
export type InsertOutcome = 'inserted' | 'exists' | 'mismatch';

/**
 * Persistence of create-subscription, the platform's hottest write. Its read and its write are
 * one statement each (instead of one ORM round trip per entity), and both are group-committed:
 * the creates that arrive together share one facts query and one insert statement, because a
 * round trip to Postgres costs far more here than the SQL it carries. The domain still decides:
 * `Subscription.start` builds each aggregate and its events; this class only reads and persists.
 */
export class SubscriptionStore {
  constructor(private readonly orm: MikroORM) {}

  loadEnrolmentFacts(req: EnrolmentRequest): Promise<EnrolmentFacts> {
    return this.facts.submit(req);
  }

  /**
   * Inserts a new live subscription and its outbox events atomically. `exists`, writing nothing,
   * when the member already has a live subscription to the plan: the partial unique index
   * `subscriptions_live_unique` decides, so concurrent creates (in one batch or not) cannot both
   * win; within one statement the first row wins.
   */
  insertLiveSubscription(sub: Subscription, events: { type: string; data: Record<string, unknown> }[]): Promise<InsertOutcome> {
    return this.inserts.submit({ sub, events, traceContext: injectTraceHeaders() });
  }

  private readonly facts = new Batcher<EnrolmentRequest, EnrolmentFacts>(
    async (batch) => {
      const col = (f: (r: EnrolmentRequest) => string | undefined) => batch.map((r) => f(r)?.toLowerCase() ?? null);
      const scope = (alias: string) => `${alias}.merchant_id = r.merchant_id`;
      const res = await queryPrepared<{ member: EnrolmentFacts['member']; plan: EnrolmentFacts['plan']; payment_method: EnrolmentFacts['paymentMethod'] }>(
        this.orm,
        'subscription_enrolment_facts',
        `select
           (select json_build_object('id', m.id, 'merchantId', m.merchant_id) from members m where m.id = r.member_id and ${scope('m')}) as member,
           (select json_build_object('id', p.id, 'merchantId', p.merchant_id, 'isActive', p.is_active, 'interval', p.billing_interval,
                                     'intervalCount', p.interval_count, 'trialDays', p.trial_days)
              from plans p where p.id = r.plan_id and ${scope('p')}) as plan,
           (select json_build_object('id', x.id, 'memberId', x.member_id) from payment_methods x where x.id = r.payment_method_id and ${scope('x')}) as payment_method
         from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[]) with ordinality as r(member_id, plan_id, payment_method_id, merchant_id, ord)
         order by r.ord`,
        [col((r) => r.memberId), col((r) => r.planId), col((r) => r.paymentMethodId), col((r) => r.merchantId)],
      );
      return res.rows.map((row, i) => ({ member: row.member, plan: row.plan, paymentMethod: batch[i]!.paymentMethodId ? row.payment_method : null }));
    },
  );

  private readonly inserts = new Batcher<NewSubscription, InsertOutcome>(
    async (batch) => {
      const iso = (d: Date | null) => d?.toISOString() ?? null;
      const subs = batch.map(({ sub }, seq) => ({
        seq,
        id: sub.id,
        merchant_id: sub.merchantId,
        member_id: sub.memberId,
        plan_id: sub.planId,
        payment_method_id: sub.paymentMethodId,
        status: sub.status,
        current_period_start: iso(sub.currentPeriodStart),
        current_period_end: iso(sub.currentPeriodEnd),
        next_billing_at: iso(sub.nextBillingAt),
        billing_anchor: iso(sub.billingAnchor),
        cancel_at_period_end: sub.cancelAtPeriodEnd,
        paused_at: iso(sub.pausedAt),
        resume_at: iso(sub.resumeAt),
        cancelled_at: iso(sub.cancelledAt),
        created_at: iso(sub.createdAt),
        updated_at: iso(sub.updatedAt),
      }));
      let seq = 0;
      const outbox = batch.flatMap(({ sub, events, traceContext }) =>
        events.map((e) => ({ seq: seq++, subscription_id: sub.id, id: randomUUID(), type: e.type, merchant_id: sub.merchantId, data: e.data, occurred_at: iso(sub.createdAt), trace_context: traceContext })),
      );
      const res = await queryPrepared<{ ids: string[]; events: number }>(
        this.orm,
        'subscription_insert_live_batch',
        `with inserted as (
           insert into subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, status, current_period_start, current_period_end,
                                      next_billing_at, billing_anchor, cancel_at_period_end, paused_at, resume_at, cancelled_at, created_at, updated_at)
           select s.id, s.merchant_id, s.member_id, s.plan_id, s.payment_method_id, s.status, s.current_period_start, s.current_period_end,
                  s.next_billing_at, s.billing_anchor, s.cancel_at_period_end, s.paused_at, s.resume_at, s.cancelled_at, s.created_at, s.updated_at
             from jsonb_to_recordset($1::jsonb) as s(seq int, id uuid, merchant_id uuid, member_id uuid, plan_id uuid, payment_method_id uuid, status text,
                    current_period_start timestamptz, current_period_end timestamptz, next_billing_at timestamptz, billing_anchor timestamptz,
                    cancel_at_period_end boolean, paused_at timestamptz, resume_at timestamptz, cancelled_at timestamptz, created_at timestamptz, updated_at timestamptz)
            order by s.seq
           on conflict (member_id, plan_id) where status <> 'Cancelled' do nothing
           returning id),
         events as (
           insert into outbox (id, type, merchant_id, data, occurred_at, trace_context)
           select e.id, e.type, e.merchant_id, e.data, e.occurred_at, e.trace_context
             from jsonb_to_recordset($2::jsonb) as e(seq int, subscription_id uuid, id uuid, type text, merchant_id uuid, data jsonb, occurred_at timestamptz, trace_context jsonb)
             join inserted i on i.id = e.subscription_id
            order by e.seq
           returning 1)
         select coalesce((select json_agg(id) from inserted), '[]') as ids, (select count(*) from events)::int as events`,
        [JSON.stringify(subs), JSON.stringify(outbox)],
      );
      const [row] = res.rows;
      const inserted = new Set(row!.ids);
      const expectedEvents = batch.reduce((n, x) => n + (inserted.has(x.sub.id) ? x.events.length : 0), 0);
      // Cannot happen (the events join the inserted rows); reported per request rather than
      // thrown, since the statement has committed and must not be retried.
      if (row!.events !== expectedEvents) return batch.map(() => 'mismatch' as const);
      return batch.map((x) => (inserted.has(x.sub.id) ? 'inserted' : 'exists'));
    },
  );
}
