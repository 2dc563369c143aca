import type { MikroORM } from '@mikro-orm/postgresql';
import { distinctUuids, DomainError, isUuidText, type PlanInterval } from '@billing/contracts';
import { Batcher, decideItem, insertOutboxSql, LOST, optimisticWriter, queryPrepared, toOutboxJsonRow, type CallScope, type Lost, type PreparedQuery } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import type { BillingSchedule } from '../plans/billing-interval.js';
import { Subscription } from './subscription.js';
import { subscriptionOfRow, subscriptionsWithPlansSql, unchangedSubscriptionsSql, type SubscriptionRow } from './subscription-row.js';

/** What enrolling a member needs to know. */
export interface EnrolmentFacts {
  member: { id: string; merchantId: string } | null;
  plan: { id: string; merchantId: string; isActive: boolean; interval: PlanInterval; intervalCount: number; trialDays: number } | null;
  paymentMethod: { id: string; memberId: string } | null;
  /** The subscription that already has the request's caller-chosen `id` (of any merchant), if any. */
  existing: Subscription | null;
}

/** Enrolment inside one merchant (a merchant scope): only that merchant's rows are facts. Ids are UUIDs (checked by the caller). */
export interface EnrolmentRequest {
  merchantId: string;
  memberId: string;
  planId: string;
  paymentMethodId?: string;
  /** The caller-chosen id of the subscription (a repeat of a create finds the one it made). */
  id?: string;
  /** The enrolment's caller operation, recorded on the subscription (`subscriptions.enrolment_key`). */
  enrolmentKey?: string;
}

/** A subscription to insert with the events it records. */
export interface Enrolment {
  sub: Subscription;
  events: { type: string; data: Record<string, unknown> }[];
}

/**
 * The domain's decision for one enrolment, given its facts: the subscription to insert, or the
 * existing one to answer with (a repeated create, inserting nothing), or a DomainError thrown
 * (which is that request's answer; it throws before deciding anything else).
 */
export type EnrolmentDecision = (facts: EnrolmentFacts) => Enrolment | { repeated: Subscription };

interface SubmittedEnrolment {
  req: EnrolmentRequest;
  decide: EnrolmentDecision;
  traceContext: Record<string, string>;
}

interface NewSubscription extends Enrolment {
  traceContext: Record<string, string>;
  enrolmentKey: string | null;
}

/** How an enrolment ended: refused by the domain, or answered with the subscription an earlier create made (`repeated`), or inserted, or `exists`/`mismatch` (see InsertOutcome). */
export type EnrolmentOutcome = { ok: false; error: DomainError } | { ok: true; outcome: InsertOutcome | 'repeated'; sub: Subscription };

/**
 * A state change of one subscription: `change` runs the aggregate's transition, given its plan's
 * schedule. It may run more than once, each time on a fresh read of the row (when a concurrent
 * write changed the row before this one was stored), so it changes nothing but that aggregate.
 */
export interface TransitionRequest {
  scope: CallScope;
  id: string;
  change: (sub: Subscription, plan: BillingSchedule | undefined, facts: TransitionFacts) => void;
}

/** What a transition may need to know beyond the subscription's row, read with it. */
export interface TransitionFacts {
  /** A charge of the subscription has no provider answer recorded: in flight, or its outcome unknown until a billing run reconciles it. */
  chargeUnanswered: boolean;
}

interface SubmittedTransition extends TransitionRequest {
  traceContext: Record<string, string>;
}

/** How a transition ended: applied, a no-op or refused. */
type TransitionOutcome = { ok: true; sub: Subscription } | { ok: false; error: DomainError };

/**
 * The columns a transition of a live subscription may change, all written back for a changed row
 * (only if the row is still as read, so an unchanged one keeps its value: the service stores
 * instants in ms, as JS has them).
 */
const TRANSITION_COLUMNS = ['status', 'current_period_start', 'current_period_end', 'next_billing_at', 'billing_anchor', 'cancel_at_period_end', 'paused_at', 'resume_at', 'cancelled_at', 'updated_at'] as const;

/** A subscription row as jsonb (instants in ISO 8601), with its plan's schedule. */
interface ReadRow {
  sub: SubscriptionRow;
  /** Null only if the plan were missing (a foreign key forbids it). */
  plan_interval: PlanInterval | null;
  plan_interval_count: number | null;
  charge_unanswered: boolean;
}

/** The values of TRANSITION_COLUMNS, as written (instants in ISO 8601). */
function transitionColumnsOf(sub: Subscription): Record<(typeof TRANSITION_COLUMNS)[number], string | boolean | null> {
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  return {
    status: sub.status,
    current_period_start: iso(sub.currentPeriodStart),
    current_period_end: iso(sub.currentPeriodEnd),
    next_billing_at: iso(sub.nextBillingAt),
    billing_anchor: iso(sub.billingAnchor),
    cancel_at_period_end: sub.cancelAtPeriodEnd,
    paused_at: iso(sub.pausedAt),
    resume_at: iso(sub.resumeAt),
    cancelled_at: iso(sub.cancelledAt),
    updated_at: iso(sub.updatedAt),
  };
}

/** How an insert ended: written, refused by a live subscription of the member to the plan, or broken. */
export type InsertOutcome = 'inserted' | 'exists' | 'mismatch';

/**
 * Persistence of create-subscription, the platform's hottest write, and of pause/resume/cancel.
 * Each read and each write is one statement (instead of one ORM round trip per entity), and all
 * are group-committed: the creates that arrive together share one batch, which is one facts
 * query, the domain's decision for each request, and one insert statement, because a round trip
 * to Postgres (and a wait for a batch) costs far more here than the SQL it carries; transitions
 * likewise (see `transition`). The domain still decides: `Subscription.start` builds each
 * aggregate and its events, its transitions change it; this class only reads and persists.
 */
export class SubscriptionStore {
  private readonly transitions: (t: SubmittedTransition) => Promise<TransitionOutcome>;

  /** `optimisticAttempts` (default `OPTIMISTIC_ATTEMPTS`): 0 decides every transition under its row lock, as tests of that path do. */
  constructor(
    private readonly orm: MikroORM,
    opts: { optimisticAttempts?: number } = {},
  ) {
    this.transitions = optimisticWriter(orm, (query, batch, mode) => this.attemptTransitions(query, batch, mode), {
      keyOf: (t) => t.id.toLowerCase(),
      optimisticAttempts: opts.optimisticAttempts,
    });
  }

  /**
   * Reads the enrolment's facts, lets `decide` build the subscription from them, and inserts it
   * with its outbox events atomically. `exists`, writing nothing, when the member already has a
   * live subscription to the plan: the partial unique index `subscriptions_live_unique` decides,
   * so concurrent creates (in one batch or not) cannot both win; within one statement the first
   * row wins. The facts are read as committed when the batch runs (as a separate read before the
   * insert always did); only the unique index is decided at insert.
   */
  async enrol(req: EnrolmentRequest, decide: EnrolmentDecision): Promise<{ outcome: InsertOutcome | 'repeated'; sub: Subscription }> {
    const settled = await this.enrolments.submit({ req, decide, traceContext: injectTraceHeaders() });
    if (!settled.ok) throw settled.error;
    return settled;
  }

  /**
   * Loads, changes and saves a subscription with its events, optimistically and group-committed:
   * the transitions that arrive together share one attempt of two autocommit statements, a read
   * of their rows (without locks) with their plans' schedules, then, after the aggregate has
   * decided each item, one write of the changed rows with their outbox events. The write is a
   * compare-and-swap: a row is updated, and its events inserted, only if the whole row is still
   * as read. A transition whose row changed in between (another transition, a billing run, any
   * writer) is decided again on a fresh read in a later batch; after `OPTIMISTIC_ATTEMPTS` lost
   * attempts it is decided under its row lock (`for update`, in a transaction), which cannot
   * lose, so every transition ends. Two transitions of one subscription never share a batch.
   * Another merchant's subscription is `not_found`, as a missing one. A DomainError from
   * `change` (which throws before changing anything) is that request's answer and writes
   * nothing of it; a no-op (a repeated `cancel(atPeriodEnd)`) writes nothing either and is
   * answered from the row as read. Any other failure fails the attempt, whose write is one statement (all or nothing), and
   * its requests run again one per attempt (`Batcher`). Each event carries the trace context of
   * its own request.
   */
  async transition(req: TransitionRequest): Promise<Subscription> {
    const outcome = await this.transitions({ ...req, traceContext: injectTraceHeaders() });
    if (!outcome.ok) throw outcome.error;
    return outcome.sub;
  }

  /**
   * One attempt of a batch of transitions (see `transition`, `optimisticWriter`): with `lock`, in the caller's
   * transaction, the read takes the row locks (in id order, so concurrent batches cannot
   * deadlock) and no write can be lost.
   */
  private async attemptTransitions(query: PreparedQuery, batch: readonly SubmittedTransition[], opts: { lock: boolean }): Promise<(TransitionOutcome | Lost)[]> {
    const ids = distinctUuids(batch.map((t) => t.id));
    const { rows } = ids.length === 0 ? { rows: [] } : await query<ReadRow>(
      opts.lock ? 'subscription_transition_lock' : 'subscription_transition_read',
      subscriptionsWithPlansSql('$1', opts),
      [ids],
    );
    const loaded = new Map(rows.map((r) => [r.sub.id, r]));
    const outcomes: TransitionOutcome[] = [];
    /** The id each item writes, if it changed its row. */
    const writes: (string | undefined)[] = [];
    const changed: Record<string, unknown>[] = [];
    const outbox: Record<string, unknown>[] = [];
    for (const t of batch) {
      const row = isUuidText(t.id) ? loaded.get(t.id.toLowerCase()) : undefined;
      writes.push(undefined);
      if (!row || (t.scope.kind === 'merchant' && row.sub.merchant_id !== t.scope.merchantId)) {
        outcomes.push({ ok: false, error: new DomainError('not_found', 'Subscription not found.') });
        continue;
      }
      const sub = subscriptionOfRow(row.sub);
      const before = JSON.stringify(transitionColumnsOf(sub));
      const plan = row.plan_interval ? { interval: row.plan_interval, intervalCount: row.plan_interval_count! } : undefined;
      const decision = decideItem(() => t.change(sub, plan, { chargeUnanswered: row.charge_unanswered }));
      if (!decision.ok) {
        outcomes.push(decision);
        continue;
      }
      const after = transitionColumnsOf(sub);
      const events = sub.pullEvents();
      if (JSON.stringify(after) !== before || events.length > 0) {
        writes[writes.length - 1] = sub.id;
        changed.push({ id: sub.id, read: row.sub, ...after });
      }
      for (const type of events) {
        outbox.push({ ...toOutboxJsonRow(outbox.length, { type, merchantId: sub.merchantId, data: sub.toView(), traceContext: t.traceContext }), subscription_id: sub.id });
      }
      outcomes.push({ ok: true, sub });
    }
    if (changed.length === 0) return outcomes;
    // One statement (a compare-and-swap per row, then the events of the rows it updated): see
    // `transition`. `s.id = any($3)` keeps the compare and the update on the primary key: joined
    // to the recordset alone, the planner scanned the whole table (taking to_jsonb of every row)
    // once it had some thousands of rows, which tripled Postgres's CPU per transition.
    const res = await query<{ ids: string[] }>(
      'subscription_transition_write',
      `with c as (
         select * from jsonb_to_recordset($1::jsonb) as c(id uuid, read jsonb, status text, current_period_start timestamptz, current_period_end timestamptz,
                next_billing_at timestamptz, billing_anchor timestamptz, cancel_at_period_end boolean, paused_at timestamptz,
                resume_at timestamptz, cancelled_at timestamptz, updated_at timestamptz)),
       unchanged as materialized (${unchangedSubscriptionsSql('$3')}),
       updated as (
         update subscriptions s
            set status = c.status, current_period_start = c.current_period_start, current_period_end = c.current_period_end,
                next_billing_at = c.next_billing_at, billing_anchor = c.billing_anchor, cancel_at_period_end = c.cancel_at_period_end,
                paused_at = c.paused_at, resume_at = c.resume_at, cancelled_at = c.cancelled_at, updated_at = c.updated_at
           from c
          where s.id = c.id and s.id = any($3::uuid[]) and s.id in (select id from unchanged)
         returning s.id),
       events as (
         ${insertOutboxSql('$2', { column: 'subscription_id', written: 'updated' })}
         returning 1)
       select coalesce((select json_agg(id) from updated), '[]') as ids`,
      [JSON.stringify(changed), JSON.stringify(outbox), changed.map((c) => c.id)],
    );
    const updated = new Set(res.rows[0]!.ids);
    // Cannot happen (the rows are locked); thrown, so the transaction rolls back.
    if (opts.lock && updated.size !== changed.length) throw new Error(`subscription transition under lock wrote ${updated.size}/${changed.length} rows`);
    return outcomes.map((o, i) => (writes[i] !== undefined && !updated.has(writes[i]) ? LOST : o));
  }

  private readonly enrolments = new Batcher<SubmittedEnrolment, EnrolmentOutcome>(async (batch) => {
    const facts = await this.readFacts(batch.map((e) => e.req));
    const outcomes: EnrolmentOutcome[] = [];
    const decided: NewSubscription[] = [];
    batch.forEach((e, i) => {
      const enrolment = decideItem(() => e.decide(facts[i]!));
      if (!enrolment.ok) outcomes.push(enrolment);
      else if ('repeated' in enrolment.value) outcomes.push({ ok: true, outcome: 'repeated', sub: enrolment.value.repeated });
      else {
        decided.push({ ...enrolment.value, traceContext: e.traceContext, enrolmentKey: e.req.enrolmentKey ?? null });
        outcomes.push({ ok: true, outcome: 'inserted', sub: enrolment.value.sub });
      }
    });
    if (decided.length > 0) {
      const written = new Map(decided.map((d, i) => [d.sub, i]));
      const inserted = await this.insertRows(decided);
      for (const o of outcomes) if (o.ok) o.outcome = inserted[written.get(o.sub)!]!;
    }
    return outcomes;
  },
  // Two creates with one caller-chosen id never share a batch: the later one must see the row the earlier inserted.
  { keyOf: (e) => e.req.id?.toLowerCase() },
  );

  /** The facts of each request, in order: one statement for the batch. */
  private async readFacts(batch: readonly EnrolmentRequest[]): Promise<EnrolmentFacts[]> {
    const col = (f: (r: EnrolmentRequest) => string | undefined) => batch.map((r) => f(r)?.toLowerCase() ?? null);
    const scope = (alias: string) => `${alias}.merchant_id = r.merchant_id`;
    // Unnamed: planned for each batch with the tables as they are. As a named statement, the plan
    // a connection made while `subscriptions` was nearly empty (a scan) was kept as the table
    // grew: auto_explain on the writes bench showed every create's lookup of its id scanning
    // every subscription (2,241 rows removed per lookup, 270 buffers per batch by the end).
    const res = await queryPrepared<{ member: EnrolmentFacts['member']; plan: EnrolmentFacts['plan']; payment_method: EnrolmentFacts['paymentMethod']; existing: SubscriptionRow | null }>(
      this.orm,
      undefined,
      `select
         (select json_build_object('id', m.id, 'merchantId', m.merchant_id) from members m where m.id = r.member_id and ${scope('m')}) as member,
         (select json_build_object('id', p.id, 'merchantId', p.merchant_id, 'isActive', p.is_active, 'interval', p.billing_interval,
                                   'intervalCount', p.interval_count, 'trialDays', p.trial_days)
            from plans p where p.id = r.plan_id and ${scope('p')}) as plan,
         (select json_build_object('id', x.id, 'memberId', x.member_id) from payment_methods x where x.id = r.payment_method_id and ${scope('x')}) as payment_method,
         (select to_jsonb(s) from subscriptions s where s.id = r.id) as existing
       from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[]) with ordinality as r(member_id, plan_id, payment_method_id, merchant_id, id, ord)
       order by r.ord`,
      [col((r) => r.memberId), col((r) => r.planId), col((r) => r.paymentMethodId), col((r) => r.merchantId), col((r) => r.id)],
    );
    return res.rows.map((row, i) => ({
      member: row.member,
      plan: row.plan,
      paymentMethod: batch[i]!.paymentMethodId ? row.payment_method : null,
      existing: row.existing ? subscriptionOfRow(row.existing) : null,
    }));
  }

  /** Inserts the subscriptions with their outbox events: one statement; an outcome per row, in order. */
  private async insertRows(batch: readonly NewSubscription[]): Promise<InsertOutcome[]> {
    const subs = batch.map(({ sub, enrolmentKey }, seq) => ({
      seq,
      enrolment_key: enrolmentKey,
      id: sub.id,
      merchant_id: sub.merchantId,
      member_id: sub.memberId,
      plan_id: sub.planId,
      payment_method_id: sub.paymentMethodId,
      own_method_only: sub.ownMethodOnly,
      created_at: sub.createdAt.toISOString(),
      ...transitionColumnsOf(sub),
    }));
    let seq = 0;
    const outbox = batch.flatMap(({ sub, events, traceContext }) =>
      events.map((e) => ({ ...toOutboxJsonRow(seq++, { type: e.type, merchantId: sub.merchantId, data: e.data, traceContext, occurredAt: sub.createdAt }), subscription_id: sub.id })),
    );
    const res = await queryPrepared<{ ids: string[]; events: number }>(
      this.orm,
      'subscription_insert_live_batch',
      `with inserted as (
         insert into subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, own_method_only, status, current_period_start, current_period_end,
                                    next_billing_at, billing_anchor, cancel_at_period_end, paused_at, resume_at, cancelled_at, created_at, updated_at, enrolment_key)
         select s.id, s.merchant_id, s.member_id, s.plan_id, s.payment_method_id, s.own_method_only, s.status, s.current_period_start, s.current_period_end,
                s.next_billing_at, s.billing_anchor, s.cancel_at_period_end, s.paused_at, s.resume_at, s.cancelled_at, s.created_at, s.updated_at, s.enrolment_key
           from jsonb_to_recordset($1::jsonb) as s(seq int, id uuid, merchant_id uuid, member_id uuid, plan_id uuid, payment_method_id uuid, own_method_only boolean, status text, enrolment_key text,
                  current_period_start timestamptz, current_period_end timestamptz, next_billing_at timestamptz, billing_anchor timestamptz,
                  cancel_at_period_end boolean, paused_at timestamptz, resume_at timestamptz, cancelled_at timestamptz, created_at timestamptz, updated_at timestamptz)
          order by s.seq
         on conflict (member_id, plan_id) where status <> 'Cancelled' do nothing
         returning id),
       events as (
         ${insertOutboxSql('$2', { column: 'subscription_id', written: 'inserted' })}
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
  }
}
