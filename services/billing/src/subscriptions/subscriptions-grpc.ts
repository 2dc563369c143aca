import { setTimeout } from 'node:timers/promises';
import { type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText, pageWindow, parseOrThrow, SUBSCRIPTION_STATUSES } from '@billing/contracts';
import { recordEvent, requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { findScoped } from '../merchant-scope.js';
import { parseInstant } from '../transactions/instant.js';
import { isChargingNow, Subscription } from './subscription.js';
import { SubscriptionStore, type TransitionRequest } from './subscription-store.js';

/** A subscription addressed by id: another merchant's is indistinguishable from a missing one. */
export function findSubscription(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Subscription> {
  return findScoped(em, Subscription, scope, id, 'Subscription', opts);
}

/** Writes the events the aggregate recorded to the outbox, in the caller's transaction. */
export function recordSubscriptionEvents(em: EntityManager, sub: Subscription): void {
  for (const type of sub.pullEvents()) recordEvent(em, { type, merchantId: sub.merchantId, data: sub.toView() });
}

async function liveSubscriptionOf(em: EntityManager, memberId: string, planId: string): Promise<Subscription | null> {
  return em.findOne(Subscription, { memberId, planId, status: { $ne: 'Cancelled' } });
}

export function alreadyExists(existing: Pick<Subscription, 'id' | 'status'>): DomainError {
  return new DomainError('subscription_exists', `The member already has a live (${existing.status}) subscription to this plan.`, { existingSubscriptionId: existing.id });
}

/** The order of `ListSubscriptions`, which its indexes by merchant (and status), plan and member hold. */
export const SUBSCRIPTION_LIST_ORDER = { createdAt: 'asc', id: 'asc' } as const;

export const planInactive = () => new DomainError('unprocessable', 'The plan is not active; members cannot be enrolled in it.');

/**
 * The answer to a create whose caller-chosen id is taken: the subscription an earlier create with
 * that id made. The same id naming another merchant's, member's or plan's subscription is a
 * conflict, never a match.
 */
function repeatedCreate(existing: Subscription, req: { merchantId: string; memberId: string; planId: string }): Subscription {
  const same = existing.merchantId === req.merchantId.toLowerCase() && existing.memberId === req.memberId.toLowerCase() && existing.planId === req.planId.toLowerCase();
  if (!same) throw new DomainError('conflict', 'A different subscription already has this id.');
  return existing;
}

/** A create inside one merchant, as CreateSubscription receives it (ids not yet checked). */
export interface SubscriptionCreateRequest {
  merchantId: string;
  memberId: string;
  planId: string;
  paymentMethodId?: string;
  /** Charge `paymentMethodId` only, never the member's other methods (`Subscription.ownMethodOnly`). */
  ownMethodOnly?: boolean;
  /** The caller-chosen id: a repeat of the create answers the subscription it made. */
  id?: string;
  /** The enrolment (its caller's operation) making it, recorded on the subscription. */
  enrolmentKey?: string;
  startDate?: string;
}

/**
 * Creates a subscription and records its events. At most one live subscription per member and
 * plan, enforced by the partial unique index `subscriptions_live_unique`: of concurrent creates
 * exactly one inserts, and the others answer `subscription_exists` naming the winner.
 */
export function subscriptionCreation(orm: MikroORM, store: SubscriptionStore): (req: SubscriptionCreateRequest) => Promise<Subscription> {
  return async (req) => {
    const { merchantId } = req;
    const startDate = parseInstant('startDate', req.startDate);
    if (req.id !== undefined && !isUuidText(req.id)) throw DomainError.field('id', 'Must be a uuid.');
    for (const [field, id] of [['memberId', req.memberId], ['planId', req.planId], ['paymentMethodId', req.paymentMethodId]] as const) {
      if (id !== undefined && !isUuidText(id)) throw new DomainError('not_found', `${field === 'memberId' ? 'Member' : field === 'planId' ? 'Plan' : 'Payment method'} not found.`);
    }
    const request = { merchantId, memberId: req.memberId, planId: req.planId, paymentMethodId: req.paymentMethodId, id: req.id, enrolmentKey: req.enrolmentKey };
    const { outcome, sub } = await store.enrol(request, ({ member, plan, paymentMethod, existing }) => {
      if (existing) return { repeated: repeatedCreate(existing, request) };
      if (!member) throw new DomainError('not_found', 'Member not found.');
      if (!plan) throw new DomainError('not_found', 'Plan not found.');
      if (req.paymentMethodId) {
        if (!paymentMethod) throw new DomainError('not_found', 'Payment method not found.');
        if (paymentMethod.memberId !== member.id) throw DomainError.field('paymentMethodId', 'Must be a payment method of the member.');
      }
      if (!plan.isActive) throw planInactive();
      const started = Subscription.start({ merchantId: member.merchantId, memberId: member.id, planId: plan.id, paymentMethodId: paymentMethod?.id ?? null, ownMethodOnly: req.ownMethodOnly, startDate, plan });
      if (req.id) started.id = req.id.toLowerCase();
      return { sub: started, events: started.pullEvents().map((type) => ({ type, data: started.toView() })) };
    });
    if (outcome === 'inserted' || outcome === 'repeated') return sub;
    if (outcome === 'mismatch') throw new DomainError('internal', 'outbox insert mismatch');
    const winner = await liveSubscriptionOf(orm.em.fork(), sub.memberId, sub.planId);
    if (!winner) throw new DomainError('conflict', 'The subscription could not be created; retry.');
    // A concurrent create with the same caller-chosen id won: this one repeats it.
    if (request.id !== undefined && winner.id === request.id.toLowerCase()) return repeatedCreate(winner, request);
    throw alreadyExists(winner);
  };
}

/** `store`: the subscriptions' writers, shared with the enrolments when the app passes it (one set of batchers for both). */
/**
 * Runs `attempt` again while it is refused because a charge of the subscription is in flight
 * (`isChargingNow`), backing off from 25 to 250 ms, for up to `waitMs`; then that refusal (409,
 * Retry-After) is the answer.
 */
async function afterChargeInFlight<T>(attempt: () => Promise<T>, waitMs: number): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let delay = 25; ; delay = Math.min(delay * 2, 250)) {
    try {
      return await attempt();
    } catch (e) {
      if (!isChargingNow(e) || Date.now() + delay > deadline) throw e;
      await setTimeout(delay);
    }
  }
}

/**
 * `store`: the subscriptions' writers, shared with the enrolments when the app passes it (one set of batchers for both).
 * `cancelWaitMs` (`BILLING_CANCEL_WAIT_MS`): a cancel or resume of a subscription being charged
 * right now waits this long for the charge's answer and is then decided on what it left (the
 * period it paid), so an answered cancel is never overtaken by a charge already in flight, and a
 * resume never starts a new period beside one that charge paid for.
 */
export function subscriptionsGrpc(orm: MikroORM, store = new SubscriptionStore(orm), opts: { cancelWaitMs?: number } = {}): ServiceImpl<'billing.v1.Subscriptions'> {
  const cancelWaitMs = opts.cancelWaitMs ?? 3000;
  const createSubscription = subscriptionCreation(orm, store);
  const transition = async (req: { scope?: Parameters<typeof requireScope>[0]; id: string }, change: TransitionRequest['change']) =>
    (await store.transition({ scope: requireScope(req.scope), id: req.id, change })).toMessage();

  return {
    CreateSubscription: async (req) => (await createSubscription({ ...req, merchantId: requireMerchantScope(req.scope) })).toMessage(),

    GetSubscription: async (req) => (await findSubscription(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListSubscriptions: async (req) => {
      const where: Record<string, unknown> = { merchantId: requireMerchantScope(req.scope) };
      if (req.memberId) where.memberId = req.memberId.toLowerCase();
      if (req.planId) where.planId = req.planId.toLowerCase();
      if (req.status) {
        if (!(SUBSCRIPTION_STATUSES as readonly string[]).includes(req.status)) throw DomainError.field('status', `Must be one of ${SUBSCRIPTION_STATUSES.join(', ')}.`);
        where.status = req.status;
      }
      const [items, total] = await orm.em.fork().findAndCount(Subscription, where, { orderBy: SUBSCRIPTION_LIST_ORDER, ...pageWindow(req) });
      return { items: items.map((s) => s.toMessage()), totalCount: total };
    },

    PauseSubscription: async (req) => {
      requireScope(req.scope); // an unscoped call is refused before its body is looked at
      const resumeAt = parseInstant('resumeAt', req.resumeAt);
      return transition(req, (sub, plan) => sub.pause(resumeAt, new Date(), plan ?? undefined));
    },

    // Waits, as a cancel does, for a charge in flight to be answered (the period it pays for
    // decides the resume); a charge whose outcome is unknown refuses it (`Subscription.resume`).
    ResumeSubscription: async (req) =>
      afterChargeInFlight(
        () =>
          transition(req, (sub, plan, facts) => {
            // Cannot happen (a foreign key); not a DomainError, so the batch is retried item by item.
            if (!plan) throw new Error(`plan ${sub.planId} of subscription ${sub.id} is missing`);
            sub.resume(plan, new Date(), facts);
          }),
        cancelWaitMs,
      ),

    CancelSubscription: async (req) => afterChargeInFlight(() => transition(req, (sub) => sub.cancel(Boolean(req.atPeriodEnd))), cancelWaitMs),
  };
}
