import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { createLogger } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { BillingConfig } from '../config.js';
import { membersGrpc } from '../members/members-grpc.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import { paymentMethodsGrpc } from '../payment-methods/payment-methods-grpc.js';
import type { PaymentProvider } from '../payment-provider/payment-provider.js';
import { PaymentProviders } from '../payment-provider/payment-providers.js';
import { plansGrpc } from '../plans/plans-grpc.js';
import { productsGrpc } from '../products/products-grpc.js';
import { questionsGrpc } from '../questions/questions-grpc.js';
import { enrolmentsGrpc, enrolmentWriters } from './enrolments-grpc.js';

// Enrol against a real Postgres: what one call makes, and that a repeat after an enrolment that
// stopped half way (its process killed after a step) converges on what that one made. The
// provider-token path is the hosted checkout's and is exercised end to end with the sandbox
// provider (tests/e2e/checkout*.test.ts); here mostly the instrument path (onboarding's), and
// the token path's answers with a provider that knows one token.

const { orm, rows } = useMigratedDatabase({
  open: (url) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url, DB_POOL_MAX: '10' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

/** The gRPC call object, which these handlers never read. */
const NO_CALL = undefined as never;
const CARD = { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040 };

/** A provider that knows one card token, `tok_known`, for every merchant. */
const ONE_TOKEN_PROVIDER = {
  lookupToken: async (_account: string, token: string) =>
    token === 'tok_known' ? { token, type: 'Card' as const, brand: 'Visa', last4: '1111', expiryMonth: 1, expiryYear: 2041, accountName: null, bsb: null } : null,
} as unknown as PaymentProvider;

/** A merchant with a product asking one required text question, and an active plan of it. */
async function merchantWithPlan() {
  const merchant = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  await orm().em.fork().persistAndFlush(merchant);
  const scope = { kind: 'merchantId' as const, merchantId: merchant.id };
  const product = await productsGrpc(orm()).CreateProduct({ scope, name: 'Membership' }, NO_CALL);
  const question = await questionsGrpc(orm()).CreateQuestion({ scope, productId: product.id, text: 'Goal?', kind: 'Text', required: true, optionLabels: [] }, NO_CALL);
  const plan = await plansGrpc(orm()).CreatePlan(
    { scope, productId: product.id, name: 'Monthly', amountMinor: '1995', currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0, isActive: true },
    NO_CALL,
  );
  const enrolments = enrolmentsGrpc(orm(), new PaymentProviders(ONE_TOKEN_PROVIDER), enrolmentWriters(orm()), { logger: createLogger('billing-test', 'silent') });
  const request = (email: string, extra: Record<string, unknown> = {}) => ({
    scope,
    email,
    firstName: 'Ada',
    lastName: 'Lovelace',
    instrument: CARD,
    planId: plan.id,
    productId: product.id,
    answers: [{ questionId: question.id, textValue: 'Strength', optionIds: [] }],
    ...extra,
  });
  return { merchantId: merchant.id, scope, productId: product.id, planId: plan.id, questionId: question.id, enrol: (req: object) => enrolments.Enrol(req as never, NO_CALL), request };
}

/** What the merchant's tables hold for `email`: its members, methods, subscriptions, answers and events. */
async function madeFor(merchantId: string, email: string) {
  const members = await rows<{ id: string }>('select id from billing.members where merchant_id = ? and email = ?', [merchantId, email]);
  const ids = members.map((m) => m.id);
  // Each row's id (an answer's: its question's).
  const of = (table: string, id = 'id') => (ids.length ? rows<{ id: string }>(`select ${id} as id from billing.${table} where member_id in (${ids.map(() => '?').join(',')})`, ids) : []);
  const outbox = await rows<{ type: string; data: { id?: string; memberId?: string } }>('select type, data from billing.outbox where merchant_id = ? order by type', [merchantId]);
  const events = outbox.filter((e) => ids.includes(e.data.memberId ?? e.data.id ?? ''));
  return { members: ids, methods: (await of('payment_methods')).map((r) => r.id), subscriptions: (await of('subscriptions')).map((r) => r.id), answers: (await of('member_answers', 'question_id')).length, events: events.map((e) => e.type) };
}

async function refusal(p: Promise<unknown>): Promise<DomainError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  if (!(e instanceof DomainError)) throw new Error(`expected a DomainError, got ${String(e)}`);
  return e;
}

describe('Enrol', () => {
  it('makes the member, its payment method, its subscription, its answers and their events in one call', async () => {
    const m = await merchantWithPlan();
    const reply = await m.enrol(m.request('ada@example.com'));
    expect(reply.memberCreated).toBe(true);
    expect(reply.paymentMethod).toMatchObject({ memberId: reply.member!.id, type: 'Card', last4: '4242', rank: 1 });
    expect(reply.subscription).toMatchObject({ memberId: reply.member!.id, planId: m.planId, paymentMethodId: reply.paymentMethod!.id });
    const made = await madeFor(m.merchantId, 'ada@example.com');
    expect(made).toMatchObject({ members: [reply.member!.id], methods: [reply.paymentMethod!.id], subscriptions: [reply.subscription!.id], answers: 1 });
    expect(made.events).toEqual(expect.arrayContaining(['member.created', 'payment_method.added', 'subscription.created']));
  });

  // The states an enrolment leaves when its process dies after each step, made by the step's own
  // RPC: a repeat (adopting what was made since it started) finishes the enrolment on them.
  const stoppedAfter = {
    member: async (m: Awaited<ReturnType<typeof merchantWithPlan>>, email: string) => {
      await membersGrpc(orm()).CreateMember({ scope: m.scope, email, firstName: 'Ada', lastName: 'Lovelace' }, NO_CALL);
    },
    'payment method': async (m: Awaited<ReturnType<typeof merchantWithPlan>>, email: string) => {
      const { member } = await membersGrpc(orm()).CreateMember({ scope: m.scope, email, firstName: 'Ada', lastName: 'Lovelace' }, NO_CALL);
      await paymentMethodsGrpc(orm(), {} as PaymentProviders).AddPaymentMethod({ scope: m.scope, memberId: member!.id, ...CARD }, NO_CALL);
    },
    subscription: async (m: Awaited<ReturnType<typeof merchantWithPlan>>, email: string) => {
      await m.enrol(m.request(email, { answers: [] }));
    },
  };
  for (const [step, stop] of Object.entries(stoppedAfter)) {
    it(`converges after an enrolment that stopped after its ${step}: one of each, the answers saved`, async () => {
      const m = await merchantWithPlan();
      const email = `stopped-${step.replace(' ', '-')}@example.com`;
      const startedAt = new Date(Date.now() - 1000).toISOString();
      await stop(m, email);
      const reply = await m.enrol(m.request(email, { adoptSince: startedAt }));
      expect(reply.memberCreated).toBe(false);
      expect(await madeFor(m.merchantId, email)).toMatchObject({ members: [reply.member!.id], methods: [reply.paymentMethod!.id], subscriptions: [reply.subscription!.id], answers: 1 });
      const again = await m.enrol(m.request(email, { adoptSince: startedAt }));
      expect([again.member!.id, again.paymentMethod!.id, again.subscription!.id]).toEqual([reply.member!.id, reply.paymentMethod!.id, reply.subscription!.id]);
    });
  }

  it('adds a method with other details to an existing member, and a caller-chosen subscription id repeats its subscription', async () => {
    const m = await merchantWithPlan();
    const id = randomUUID();
    const first = await m.enrol(m.request('grace@example.com', { subscriptionId: id }));
    expect(first.subscription!.id).toBe(id);
    const other = await m.enrol(m.request('grace@example.com', { subscriptionId: id, instrument: { ...CARD, last4: '1881' } }));
    expect(other.paymentMethod!.id).not.toBe(first.paymentMethod!.id);
    expect(other.paymentMethod!.rank).toBe(2);
    expect(other.subscription!.id).toBe(id);
    expect((await madeFor(m.merchantId, 'grace@example.com')).subscriptions).toEqual([id]);
  });

  it('answers subscription_exists naming a live subscription older than adoptSince, or with no adoptSince', async () => {
    const m = await merchantWithPlan();
    const first = await m.enrol(m.request('joan@example.com'));
    for (const extra of [{}, { adoptSince: new Date(Date.now() + 1000).toISOString() }]) {
      const e = await refusal(m.enrol(m.request('joan@example.com', extra)));
      expect(e.code).toBe('subscription_exists');
      expect(e.extensions.existingSubscriptionId).toBe(first.subscription!.id);
    }
    expect((await madeFor(m.merchantId, 'joan@example.com')).subscriptions).toEqual([first.subscription!.id]);
  });

  it('concurrent enrolments of one email and plan: one enrols, the others are subscription_exists having written nothing', async () => {
    // Regression: each passed the "already subscribed" check before any had subscribed, and added
    // its payment method (and payment_method.added) before the subscription refused all but one.
    const m = await merchantWithPlan();
    const email = 'racing@example.com';
    const outcomes = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => m.enrol(m.request(email, { instrument: { ...CARD, last4: `424${i}` }, subscriptionId: randomUUID() }))));
    const enrolled = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    expect(enrolled).toHaveLength(1);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ code: 'subscription_exists', extensions: { existingSubscriptionId: enrolled[0]!.subscription!.id } });
    const made = await madeFor(m.merchantId, email);
    expect(made).toMatchObject({ methods: [enrolled[0]!.paymentMethod!.id], subscriptions: [enrolled[0]!.subscription!.id] });
    expect(made.events.filter((t) => t === 'payment_method.added')).toHaveLength(1);
    expect(await rows('select 1 from billing.enrolment_claims where merchant_id = ?', [m.merchantId])).toEqual([]);
  });

  it("adopts a subscription made since adoptSince by its own enrolment key only, never another key's", async () => {
    // Regression: an onboarding completion adopted the subscription a concurrent completion of
    // another invitation had just made (it was "created since the completion started").
    const m = await merchantWithPlan();
    const email = 'keys@example.com';
    const since = new Date(Date.now() - 1000).toISOString();
    const first = await m.enrol(m.request(email, { enrolmentKey: 'invitation-a', adoptSince: since }));
    const e = await refusal(m.enrol(m.request(email, { enrolmentKey: 'invitation-b', adoptSince: since })));
    expect(e).toMatchObject({ code: 'subscription_exists', extensions: { existingSubscriptionId: first.subscription!.id } });
    const again = await m.enrol(m.request(email, { enrolmentKey: 'invitation-a', adoptSince: since }));
    expect([again.member!.id, again.paymentMethod!.id, again.subscription!.id]).toEqual([first.member!.id, first.paymentMethod!.id, first.subscription!.id]);
  });

  it('adds the method a provider token stands for, once; an unknown token is validation_failed naming providerToken', async () => {
    const m = await merchantWithPlan();
    const tokenRequest = (email: string, token: string) => m.request(email, { instrument: undefined, providerToken: token, productId: undefined, answers: [] });
    const first = await m.enrol(tokenRequest('tok@example.com', 'tok_known'));
    expect(first.paymentMethod).toMatchObject({ last4: '1111', hasProviderToken: true });
    const again = await m.enrol({ ...tokenRequest('tok@example.com', 'tok_known'), subscriptionId: first.subscription!.id });
    expect([again.paymentMethod!.id, again.subscription!.id]).toEqual([first.paymentMethod!.id, first.subscription!.id]);
    const e = await refusal(m.enrol(tokenRequest('unknown@example.com', 'tok_unknown')));
    expect(e.code).toBe('validation_failed');
    expect(Object.keys(e.extensions.errors ?? {})).toEqual(['providerToken']);
    expect(await madeFor(m.merchantId, 'unknown@example.com')).toMatchObject({ methods: [], subscriptions: [] });
  });

  it('refuses what the request alone can refuse before it writes anything', async () => {
    const m = await merchantWithPlan();
    const email = 'refused@example.com';
    const cases: [Record<string, unknown>, string][] = [
      [{ email: 'not-an-email' }, 'email'],
      [{ instrument: undefined }, 'paymentMethod'],
      [{ providerToken: 'tok_1' }, 'paymentMethod'],
      [{ instrument: { ...CARD, last4: '42' } }, 'last4'],
      [{ adoptSince: 'yesterday' }, 'adoptSince'],
    ];
    for (const [extra, field] of cases) {
      const e = await refusal(m.enrol({ ...m.request(email), ...extra }));
      expect(e.code, field).toBe('validation_failed');
      expect(Object.keys(e.extensions.errors ?? {}), field).toEqual([field]);
    }
    expect(await refusal(m.enrol({ ...m.request(email), scope: { kind: 'platform', platform: {} } }))).toMatchObject({ code: 'bad_request' });
    expect((await madeFor(m.merchantId, email)).members).toEqual([]);
  });
});
