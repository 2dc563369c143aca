import { randomUUID } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { CreateMemberRequest, DomainError, isUuidText, parseOrThrow, type SubscriptionStatus } from '@billing/contracts';
import { faultInjector, queryPrepared, requireMerchantScope, type CallScope, type Logger, type ServiceImpl } from '@billing/service-runtime';
import { saveMemberAnswers } from '../answers/answers-grpc.js';
import { memberCreation } from '../members/create-member.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { appendTokenised, tokenLookup, type TokenLookup } from '../payment-methods/add-from-token.js';
import { methodAppender, type Appended } from '../payment-methods/append-method.js';
import { PaymentMethod, type InstrumentDetails } from '../payment-methods/payment-method.js';
import { instrumentDetailsOf } from '../payment-methods/payment-methods-grpc.js';
import { Subscription } from '../subscriptions/subscription.js';
import { SubscriptionStore } from '../subscriptions/subscription-store.js';
import { alreadyExists, planInactive, subscriptionCreation, type SubscriptionCreateRequest } from '../subscriptions/subscriptions-grpc.js';

/** Where a test may crash billing half way through an enrolment (BILLING_FAULT_FILE). */
export type EnrolmentStep = 'enrol-after-member' | 'enrol-after-payment-method';

export interface EnrolmentOptions {
  /** Test-only (never in production): crash after the step the file names. */
  faultFile?: string;
  logger: Logger;
  /** How long an enrolment waits for a concurrent one of the same email and plan before answering conflict (default 3 s). */
  claimWaitMs?: number;
}

/**
 * How long an enrolment's claim of its (merchant, email, plan) holds when its process dies before
 * deleting it: longer than any enrolment runs (a provider's token lookup included).
 */
const CLAIM_SECONDS = 30;
/**
 * How long an enrolment waits for a concurrent one of the same email and plan: well inside the
 * callers' gRPC deadline (5 s by default), so they get the conflict, not a deadline exceeded.
 */
const DEFAULT_CLAIM_WAIT_MS = 3_000;
/** How often a waiting enrolment looks again. */
const CLAIM_POLL_MS = 20;

/**
 * The writers an enrolment shares with the RPCs that make each of its steps alone
 * (CreateMember, the payment-method adds, CreateSubscription): one batcher each, so an
 * enrolment's writes and theirs share statements.
 */
export interface EnrolmentWriters {
  createMember: ReturnType<typeof memberCreation>;
  append: ReturnType<typeof methodAppender>;
  subscriptions: SubscriptionStore;
}

export function enrolmentWriters(orm: MikroORM): EnrolmentWriters {
  return { createMember: memberCreation(orm), append: methodAppender(orm), subscriptions: new SubscriptionStore(orm) };
}

const sameInstrument = (a: InstrumentDetails, b: InstrumentDetails) =>
  a.type === b.type && a.last4 === b.last4 && a.brand === b.brand && a.expiryMonth === b.expiryMonth && a.expiryYear === b.expiryYear && a.accountName === b.accountName && a.bsb === b.bsb;

/**
 * A customer enrolled in one call (see EnrolRequest): the member, its payment method, its
 * subscription and its answers, each step as its own RPC does it, in process, so the hosted
 * checkout and onboarding completions make one call to billing where they made four. Each step
 * commits on its own and is repeatable, so an enrolment that died half way is finished by the
 * next one, which converges on what it made.
 */
export function enrolmentsGrpc(orm: MikroORM, providers: PaymentProviders, writers: EnrolmentWriters, opts: EnrolmentOptions): ServiceImpl<'billing.v1.Enrolments'> {
  const { createMember, append } = writers;
  const lookupToken = tokenLookup(orm, providers);
  const createSubscription = subscriptionCreation(orm, writers.subscriptions);
  const fault: (step: EnrolmentStep) => void = faultInjector(opts.faultFile, opts.logger, 'an enrolment');

  /**
   * The member's method with these details, added when it has none. A member this enrolment
   * created has no methods to look through: every enrolment creates the member before it adds
   * a method.
   */
  const ensureMethod = async (scope: CallScope, member: { id: string; created: boolean }, details: InstrumentDetails): Promise<Appended['paymentMethod']> => {
    if (!member.created) {
      const methods = await orm.em.fork().find(PaymentMethod, { memberId: member.id }, { orderBy: { rank: 'asc' } });
      const same = methods.find((m) => sameInstrument(m, details));
      if (same) return same.toMessage();
    }
    return (await append({ scope, memberId: member.id, details, providerToken: null })).paymentMethod;
  };

  const appendLooked = async (scope: CallScope, memberId: string, looked: TokenLookup) =>
    (await appendTokenised(append, { scope, memberId, details: looked.details, providerToken: looked.token })).paymentMethod;

  /**
   * Whether an interrupted earlier run of this enrolment made `live`: created since `adoptSince`
   * by this enrolment's key (`enrolment_key`), or by none (CreateSubscription, an enrolment that
   * named no key). One a concurrent enrolment with another key made is never adopted, however
   * recent.
   */
  const adoptable = (live: { createdAt: Date; enrolmentKey: string | null }, adoptSince: Date | undefined, key: string | undefined) =>
    adoptSince !== undefined && live.createdAt.getTime() >= adoptSince.getTime() && (live.enrolmentKey === null || live.enrolmentKey === key);

  /** The subscription, or the live one an interrupted earlier run of this enrolment made (`adoptable`). */
  const subscribe = async (req: SubscriptionCreateRequest, adoptSince: Date | undefined): Promise<Subscription> => {
    try {
      return await createSubscription(req);
    } catch (e) {
      if (!(adoptSince && e instanceof DomainError && e.code === 'subscription_exists')) throw e;
      const id = String(e.extensions.existingSubscriptionId ?? '');
      // The enrolment key is a column the aggregate does not carry.
      const { rows: [made] } = await queryPrepared<{ enrolment_key: string | null }>(orm, 'billing_enrol_subscription_key', `select enrolment_key from subscriptions where id = $1`, [id]);
      const existing = await orm.em.fork().findOne(Subscription, { id });
      if (existing && made && adoptable({ createdAt: existing.createdAt, enrolmentKey: made.enrolment_key }, adoptSince, req.enrolmentKey)) return existing;
      throw e;
    }
  };

  /**
   * Refuses, before anything is written, an enrolment its subscription would refuse: an unknown
   * or inactive plan, or a member of that email with another live subscription to it (not the one
   * this enrolment names, nor one an interrupted earlier run of it made: `adoptable`). So a
   * refused completion adds no payment method (and no event) to an existing member. One read, on
   * the plan's key, the members' email index and the subscriptions' live index. Run once the
   * enrolment holds its claim (`claim`), it sees the subscription of any enrolment of the same
   * email and plan that held the claim before it.
   */
  const refuseBeforeWriting = async (merchantId: string, email: string, planId: string, subscriptionId: string | undefined, adoptSince: Date | undefined, key: string | undefined) => {
    if (!isUuidText(planId)) throw new DomainError('not_found', 'Plan not found.');
    // Named: planned once per connection, not for every completion (three keyed lookups).
    const { rows: [row] } = await queryPrepared<{ is_active: boolean; live_id: string | null; live_status: SubscriptionStatus | null; live_created_at: Date | null; live_key: string | null }>(
      orm,
      'billing_enrol_refusals_by_key',
      `select p.is_active, s.id as live_id, s.status as live_status, s.created_at as live_created_at, s.enrolment_key as live_key
         from plans p
         left join members m on m.merchant_id = p.merchant_id and lower(m.email) = $1
         left join subscriptions s on s.member_id = m.id and s.plan_id = p.id and s.status <> 'Cancelled'
        where p.id = $2 and p.merchant_id = $3`,
      [email.trim().toLowerCase(), planId.toLowerCase(), merchantId],
    );
    if (!row) throw new DomainError('not_found', 'Plan not found.');
    if (!row.is_active) throw planInactive();
    if (!row.live_id || row.live_id === subscriptionId?.toLowerCase()) return;
    if (adoptable({ createdAt: new Date(row.live_created_at!), enrolmentKey: row.live_key }, adoptSince, key)) return;
    throw alreadyExists({ id: row.live_id, status: row.live_status! });
  };

  /**
   * Takes the claim of (merchant, email, plan) for enrolment `key`, so enrolments of one member
   * email to one plan take turns from their refusal check to their subscription: the claim is a
   * row, taken by one committed upsert (no transaction or connection is held while the
   * enrolment runs), free when absent, expired (its enrolment's process died) or this key's
   * (a repeat of an interrupted enrolment). While another enrolment holds it, this one looks
   * again every CLAIM_POLL_MS, and is refused as soon as the holder's subscription is live;
   * after `claimWaitMs`, conflict.
   */
  const claim = async (merchantId: string, emailKey: string, planId: string, key: string, refuse: () => Promise<void>): Promise<void> => {
    const until = Date.now() + (opts.claimWaitMs ?? DEFAULT_CLAIM_WAIT_MS);
    for (;;) {
      // An atomic upsert decides between concurrent takers: the later waits for the earlier's
      // commit, then finds the claim held and takes nothing.
      const { rowCount } = await queryPrepared(
        orm,
        'billing_enrol_claim',
        `insert into enrolment_claims (merchant_id, email_key, plan_id, enrolment_key, held_until) values ($1, $2, $3, $4, now() + make_interval(secs => $5))
         on conflict (merchant_id, email_key, plan_id) do update set enrolment_key = excluded.enrolment_key, held_until = excluded.held_until
          where enrolment_claims.held_until < now() or enrolment_claims.enrolment_key = excluded.enrolment_key`,
        [merchantId, emailKey, planId, key, CLAIM_SECONDS],
      );
      if (rowCount === 1) return;
      await refuse();
      if (Date.now() >= until) throw new DomainError('conflict', 'Another enrolment of this customer in this plan is in progress; retry shortly.');
      await new Promise((r) => setTimeout(r, CLAIM_POLL_MS));
    }
  };

  /**
   * Gives the claim up. Its failure is logged, not answered: the enrolment's outcome stands, and
   * the claim expires (CLAIM_SECONDS), or a repeat of the enrolment takes it over.
   */
  const release = async (merchantId: string, emailKey: string, planId: string, key: string): Promise<void> => {
    try {
      await queryPrepared(orm, 'billing_enrol_release', `delete from enrolment_claims where merchant_id = $1 and email_key = $2 and plan_id = $3 and enrolment_key = $4`, [merchantId, emailKey, planId, key]);
    } catch (e) {
      opts.logger.warn({ err: e, merchantId, planId }, 'could not release an enrolment claim; it expires on its own');
    }
  };

  return {
    Enrol: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const scope: CallScope = { kind: 'merchant', merchantId };
      // Everything the request alone can refuse is refused before anything is written.
      const customer = parseOrThrow(CreateMemberRequest, { merchantId, email: req.email, firstName: req.firstName, lastName: req.lastName, phone: req.phone ?? null });
      const token = req.providerToken;
      if ((token === undefined) === !req.instrument) throw DomainError.field('paymentMethod', 'Give exactly one of a provider token and an instrument.');
      const details = req.instrument ? instrumentDetailsOf(req.instrument) : undefined;
      const adoptSince = req.adoptSince ? new Date(req.adoptSince) : undefined;
      if (adoptSince && Number.isNaN(adoptSince.getTime())) throw DomainError.field('adoptSince', 'Must be an ISO 8601 date-time.');

      // What the token stands for depends on the merchant alone: asked of the provider while the
      // member is made, one wait instead of two. Its refusal is answered once the member is there,
      // as an add to that member would be.
      const looked = token === undefined ? undefined : lookupToken(merchantId, token);
      looked?.catch(() => undefined);
      const enrolmentKey = req.enrolmentKey?.toLowerCase();
      const refuse = () => refuseBeforeWriting(merchantId, customer.email, req.planId, req.subscriptionId, adoptSince, enrolmentKey);
      if (!isUuidText(req.planId)) throw new DomainError('not_found', 'Plan not found.');
      const claimKey = (enrolmentKey ?? req.subscriptionId ?? randomUUID()).toLowerCase();
      const claimed = [merchantId, customer.email.trim().toLowerCase(), req.planId.toLowerCase(), claimKey] as const;
      await claim(...claimed, refuse);
      let released: Promise<void> | undefined;
      try {
        await refuse();
        const { member, created } = await createMember({ ...customer, merchantId });
        fault('enrol-after-member');
        const paymentMethod = looked ? await appendLooked(scope, member.id, await looked) : await ensureMethod(scope, { id: member.id, created }, details!);
        fault('enrol-after-payment-method');
        const subscription = await subscribe(
          { merchantId, memberId: member.id, planId: req.planId, paymentMethodId: paymentMethod.id, ownMethodOnly: req.ownMethodOnly, id: req.subscriptionId, enrolmentKey },
          adoptSince,
        );
        // The subscription is written: the next enrolment of the email and plan may check (while the answers are saved).
        released = release(...claimed);
        // Saving no answers replaces a member's answers with none: nothing to do for a member this
        // enrolment created (it has none yet), the usual case for a product that asks nothing.
        if (req.productId && (req.answers.length > 0 || !created)) {
          await saveMemberAnswers(orm, scope, { memberId: member.id, productId: req.productId, answers: req.answers.map((a) => ({ questionId: a.questionId, textValue: a.textValue, optionIds: a.optionIds })) });
        }
        return { member, memberCreated: created, paymentMethod, subscription: subscription.toMessage() };
      } finally {
        await (released ?? release(...claimed));
      }
    },
  };
}
