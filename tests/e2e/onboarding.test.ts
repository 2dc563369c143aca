import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { addPaymentMethod, CARD, createMember, idempotent } from '../support/billing-fixtures.js';
import { apiClient, eventually, unique } from '../support/fixtures.js';
import { tokenFromLink, waitForMessage } from '../support/mailbox.js';
import { eventsAgainstPublishedSchemas } from '../support/published-events.js';
import { emailedToken, fillWizard, invite, setUpOnboardingMerchant, signUpCustomer, type OnboardingMerchant } from '../support/onboarding-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { webhookFixtures } from '../support/webhook-fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const dataDir = inject('dataDir');
const db = new pg.Client({ connectionString: inject('databaseUrl') });

let m: OnboardingMerchant;
let receiver: WebhookReceiver;
beforeAll(async () => {
  await db.connect();
  receiver = await startWebhookReceiver();
  m = await setUpOnboardingMerchant(api, admin);
});
afterAll(async () => {
  await receiver.close();
  await db.end();
});

/** An invitation accepted by a fresh customer who signed up with the invited email. */
async function accepted(merchant: OnboardingMerchant = m) {
  const inv = await invite(api, merchant);
  const customer = await signUpCustomer(api, inv.email);
  const res = await api.post('/api/onboard/accept', { token: await emailedToken(dataDir, inv.email) }, { token: customer.token });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ...inv, customer, invitationId: inv.invitationId, accept: res.body };
}

describe('POST /api/onboard/accept', () => {
  it('binds the invitation to the customer and answers the invitation with the merchant\'s active plans', async () => {
    const { accept, invitationId, email } = await accepted();
    expect(Object.keys(accept).sort()).toEqual(['email', 'expiresAt', 'firstName', 'invitationId', 'lastName', 'merchantName', 'phone', 'plans']);
    expect(accept).toMatchObject({ invitationId, firstName: 'Ada', lastName: 'Lovelace', email, phone: null });
    expect(accept.plans).toEqual([{ id: m.planId, productId: m.productId, name: 'Monthly', amount: 19.95, currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0 }]);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: m.key })).body.status).toBe('Accepted');
  });

  it('answers the same to the same customer again, and 409 to another account', async () => {
    const { token, customer, invitationId } = await accepted();
    const again = await api.post('/api/onboard/accept', { token }, { token: customer.token });
    expect(again.status).toBe(200);
    expect(again.body.invitationId).toBe(invitationId);
    const other = await signUpCustomer(api);
    expect((await api.post('/api/onboard/accept', { token }, { token: other.token })).status).toBe(409);
    // Accepted, then expired: accepting again is 410 like the link itself, not the invitation again.
    await db.query(`update checkout.invitations set expires_at = now() - interval '1 minute' where id = $1`, [invitationId]);
    const expired = await api.post('/api/onboard/accept', { token }, { token: customer.token });
    expect(expired.status).toBe(410);
    expect(expired.body).toMatchObject({ status: 410, traceId: expect.any(String) });
  });

  it('answers 404 for an unknown token, 410 for an expired invitation, and 401 without a customer token', async () => {
    const customer = await signUpCustomer(api);
    expect((await api.post('/api/onboard/accept', { token: 'x'.repeat(43) }, { token: customer.token })).status).toBe(404);
    const { token, invitationId } = await invite(api, m);
    expect((await api.post('/api/onboard/accept', { token }, { token: m.key })).status).toBe(401);
    await db.query(`update checkout.invitations set expires_at = now() - interval '1 minute' where id = $1`, [invitationId]);
    expect((await api.post('/api/onboard/accept', { token }, { token: customer.token })).status).toBe(410);
    expect((await api.post('/api/onboard/preview', { token })).status).toBe(410);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: m.key })).body.status).toBe('Expired');
  });
});

describe('the wizard writes and GET /api/onboard/{invitationId}', () => {
  it('saves each step (204, safe to repeat) and the state resumes at the next step', async () => {
    const { customer, invitationId } = await accepted();
    const token = customer.token;
    const step = async () => (await api.get(`/api/onboard/${invitationId}`, { token })).body.step;
    expect(await step()).toBe('Details');
    for (let i = 0; i < 2; i++) expect((await api.patch('/api/onboard/details', { invitationId, firstName: 'Ada', lastName: 'King' }, { token })).status).toBe(204);
    expect(await step()).toBe('PaymentMethod');
    for (let i = 0; i < 2; i++) expect((await api.post('/api/onboard/payment-method', { invitationId, ...CARD }, { token })).status).toBe(204);
    expect(await step()).toBe('Plan');
    expect((await api.patch('/api/onboard/plan', { invitationId, planId: m.planId }, { token })).status).toBe(204);
    expect(await step()).toBe('Questions');
    const first = [{ questionId: m.questions.text.id, textValue: 'a' }, { questionId: m.questions.multi.id, optionIds: [m.questions.multi.options[0]!.id] }];
    expect((await api.patch('/api/onboard/answers', { invitationId, answers: first }, { token })).status).toBe(204);
    expect((await api.patch('/api/onboard/answers', { invitationId, answers: [{ questionId: m.questions.text.id, textValue: 'b' }] }, { token })).status).toBe(204);

    const state = await api.get(`/api/onboard/${invitationId}`, { token });
    expect(state.status).toBe(200);
    expect(state.body).toMatchObject({
      invitationId,
      status: 'Accepted',
      // The saved draft leaves the required single choice unanswered, which completion refuses.
      step: 'Questions',
      details: { firstName: 'Ada', lastName: 'King', phone: null },
      paymentMethod: { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2099, accountName: null, bsb: null },
      planId: m.planId,
      answersSaved: true,
      answers: [{ questionId: m.questions.text.id, textValue: 'b', optionIds: [] }],
      memberId: null,
      completedAt: null,
    });
    expect(state.body.questions.map((q: any) => q.id)).toEqual([m.questions.text.id, m.questions.single.id, m.questions.multi.id]);
    expect(state.body.questions[1]).toMatchObject({ kind: 'SingleChoice', required: true, options: m.questions.single.options });
    const complete = [{ questionId: m.questions.text.id, textValue: 'b' }, { questionId: m.questions.single.id, optionIds: [m.questions.single.options[0]!.id] }];
    expect((await api.patch('/api/onboard/answers', { invitationId, answers: complete }, { token })).status).toBe(204);
    expect(await step()).toBe('Review');
  });

  it('payment-method: only type is required (the step saves a draft); completion names what the method still lacks', async () => {
    const { customer, invitationId } = await accepted();
    const token = customer.token;
    const step = async () => (await api.get(`/api/onboard/${invitationId}`, { token })).body;
    await fillWizard(api, token, invitationId, m);
    for (const body of [{ type: 'Card' }, { type: 'Card', brand: 'Visa', last4: '4242' }, { type: 'BankAccount', last4: '1234' }]) {
      const r = await api.post('/api/onboard/payment-method', { invitationId, ...body }, { token });
      expect(r.status, JSON.stringify(r.body)).toBe(204);
    }
    const draft = await step();
    expect(draft.step).toBe('PaymentMethod');
    expect(draft.paymentMethod).toMatchObject({ type: 'BankAccount', last4: '1234', accountName: null, bsb: null });
    const incomplete = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(incomplete.status, JSON.stringify(incomplete.body)).toBe(400);
    expect(Object.keys(incomplete.body.errors).sort()).toEqual(['paymentMethod.accountName', 'paymentMethod.bsb']);
    expect((await api.post('/api/onboard/payment-method', { invitationId, type: 'Card' }, { token })).status).toBe(204);
    const noLast4 = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(Object.keys(noLast4.body.errors).sort()).toEqual(['paymentMethod.expiryMonth', 'paymentMethod.expiryYear', 'paymentMethod.last4']);
    expect((await api.post('/api/onboard/payment-method', { invitationId, ...CARD }, { token })).status).toBe(204);
    expect((await step()).step).toBe('Review');
    const done = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
  });

  it('validates each step with 400 naming the field, and refuses full card numbers', async () => {
    const { customer, invitationId } = await accepted();
    const token = customer.token;
    const details = await api.patch('/api/onboard/details', { invitationId, firstName: ' ', lastName: 'K' }, { token });
    expect(details.status).toBe(400);
    expect(details.body.errors.firstName).toBeDefined();
    const pan = await api.post('/api/onboard/payment-method', { invitationId, ...CARD, cardNumber: '4242424242424242' }, { token });
    expect(pan.status).toBe(400);
    expect(pan.body.errors.cardNumber).toBeDefined();
    const inBrand = await api.post('/api/onboard/payment-method', { invitationId, type: 'Card', brand: '4242424242424242' }, { token });
    expect(inBrand.body.errors).toEqual({ brand: ['Must not hold a card number; send only its last4.'] });
    // What is sent is checked (only type is required at this step: see the draft test below).
    const bank = await api.post('/api/onboard/payment-method', { invitationId, type: 'BankAccount', last4: '12345', expiryMonth: 1 }, { token });
    expect(bank.status).toBe(400);
    expect(Object.keys(bank.body.errors).sort()).toEqual(['expiryMonth', 'last4']);
    const noType = await api.post('/api/onboard/payment-method', { invitationId, last4: '1234' }, { token });
    expect(noType.status).toBe(400);
    expect(Object.keys(noType.body.errors)).toEqual(['type']);
    const unknown = await api.patch('/api/onboard/plan', { invitationId, planId: '00000000-0000-4000-8000-000000000002' }, { token });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors.planId).toBeDefined();
    const inactive = await api.post('/api/Plans', { merchantId: m.id, productId: m.productId, name: 'Old', amount: 5, interval: 'Week', isActive: false }, { token: m.key });
    const refused = await api.patch('/api/onboard/plan', { invitationId, planId: inactive.body.id }, { token });
    expect(refused.status).toBe(400);
    expect(refused.body.errors.planId).toBeDefined();
  });

  it("answers 404 for another customer's invitation on every wizard endpoint", async () => {
    const { invitationId } = await accepted();
    const other = await signUpCustomer(api);
    const token = other.token;
    expect((await api.get(`/api/onboard/${invitationId}`, { token })).status).toBe(404);
    expect((await api.patch('/api/onboard/details', { invitationId, firstName: 'A', lastName: 'B' }, { token })).status).toBe(404);
    expect((await api.post('/api/onboard/payment-method', { invitationId, ...CARD }, { token })).status).toBe(404);
    expect((await api.patch('/api/onboard/plan', { invitationId, planId: m.planId }, { token })).status).toBe(404);
    expect((await api.patch('/api/onboard/answers', { invitationId, answers: [] }, { token })).status).toBe(404);
    expect((await api.post('/api/onboard/complete', { invitationId }, { token })).status).toBe(404);
    expect((await api.get(`/api/onboard/${invitationId}`, { token: m.key })).status).toBe(401);
  });

  it('answers 410 to wizard writes once the invitation is revoked', async () => {
    const { customer, invitationId } = await accepted();
    expect((await api.del(`/api/Invitations/${invitationId}`, { token: m.key })).status).toBe(204);
    expect((await api.patch('/api/onboard/details', { invitationId, firstName: 'A', lastName: 'B' }, { token: customer.token })).status).toBe(410);
    expect((await api.post('/api/onboard/complete', { invitationId }, { token: customer.token })).status).toBe(410);
  });
});

describe('POST /api/onboard/complete', () => {
  it('names what is missing in errors', async () => {
    const { customer, invitationId } = await accepted();
    const token = customer.token;
    const empty = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(empty.status).toBe(400);
    expect(Object.keys(empty.body.errors).sort()).toEqual(['details', 'paymentMethod', 'planId']);

    await fillWizard(api, token, invitationId, m);
    await api.patch('/api/onboard/answers', { invitationId, answers: [{ questionId: m.questions.single.id, optionIds: m.questions.single.options.map((o) => o.id) }] }, { token });
    const answers = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(answers.status).toBe(400);
    expect(Object.keys(answers.body.errors).sort()).toEqual([`answers.${m.questions.single.id}`, `answers.${m.questions.text.id}`].sort());
    await api.patch('/api/onboard/answers', { invitationId, answers: [{ questionId: m.questions.text.id, textValue: 'x' }, { questionId: m.questions.single.id, optionIds: [m.questions.multi.options[0]!.id] }] }, { token });
    const foreign = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(Object.keys(foreign.body.errors)).toEqual([`answers.${m.questions.single.id}`]);
  });

  // Regression: the step was derived from whether answers had been saved at all, so a wizard past
  // its answers read Review after the merchant added a required question, which completion refused.
  it('a required question added after the answers were saved sends the wizard back to Questions, and completion asks for it', async () => {
    const own = await setUpOnboardingMerchant(api, admin);
    const { customer, invitationId } = await accepted(own);
    const token = customer.token;
    const state = async () => (await api.get(`/api/onboard/${invitationId}`, { token })).body;
    await fillWizard(api, token, invitationId, own);
    expect((await state()).step).toBe('Review');

    const ask = (body: Record<string, unknown>) => api.post(`/api/Products/${own.productId}/questions`, { merchantId: own.id, text: 'Emergency contact', kind: 'Text', ...body }, { token: own.key });
    expect((await ask({ required: false })).status).toBe(201);
    expect((await state()).step).toBe('Review');
    const added = await ask({ required: true });
    expect(added.status).toBe(201);
    const after = await state();
    expect(after).toMatchObject({ step: 'Questions', answersSaved: true });
    expect(after.questions.map((q: { id: string }) => q.id)).toContain(added.body.id);

    const refused = await api.post('/api/onboard/complete', { invitationId }, { token });
    expect(refused.status).toBe(400);
    expect(Object.keys(refused.body.errors)).toEqual([`answers.${added.body.id}`]);

    const answers = [...after.answers, { questionId: added.body.id, textValue: 'Grace, 0400 000 000' }];
    expect((await api.patch('/api/onboard/answers', { invitationId, answers }, { token })).status).toBe(204);
    expect((await state()).step).toBe('Review');
    expect((await api.post('/api/onboard/complete', { invitationId }, { token })).status).toBe(200);
    expect((await state()).step).toBe('Done');
  });

  // Regression (the step half): a wizard whose plan was withdrawn read Review, though completion refused it.
  it('answers 400 naming planId when the chosen plan became inactive, and the wizard resumes at Plan', async () => {
    const { customer, invitationId } = await accepted();
    await fillWizard(api, customer.token, invitationId, m);
    const plan = await api.post('/api/Plans', { merchantId: m.id, productId: m.productId, name: 'Soon gone', amount: 9, interval: 'Month' }, { token: m.key });
    expect((await api.patch('/api/onboard/plan', { invitationId, planId: plan.body.id }, { token: customer.token })).status).toBe(204);
    const step = async () => (await api.get(`/api/onboard/${invitationId}`, { token: customer.token })).body.step;
    expect(await step()).toBe('Review');
    expect((await api.patch(`/api/Plans/${plan.body.id}`, { isActive: false }, { token: m.key })).status).toBe(200);
    expect(await step()).toBe('Plan');
    const res = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.errors)).toEqual(['planId']);
    expect((await api.patch('/api/onboard/plan', { invitationId, planId: m.planId }, { token: customer.token })).status).toBe(204);
    expect(await step()).toBe('Review');
  });

  it('creates the member, payment method, subscription and answers, emits onboarding.completed once, and answers the same ids again', async () => {
    const merchant = await setUpOnboardingMerchant(api, admin);
    const hooks = webhookFixtures(api, receiver, admin);
    const key = await hooks.createKey(merchant.id);
    const path = `/onboarding/${unique()}`;
    await hooks.configure(merchant.id, key, path);
    await hooks.settle(merchant.id, await hooks.createKey(merchant.id));

    const { customer, invitationId, email } = await accepted(merchant);
    await fillWizard(api, customer.token, invitationId, merchant);
    const done = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(Object.keys(done.body).sort()).toEqual(['memberId', 'paymentMethodId', 'subscriptionId']);
    const again = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(done.body);

    const member = await api.get(`/api/Members/${done.body.memberId}`, { token: merchant.key });
    expect(member.body).toMatchObject({ email, firstName: 'Ada', lastName: 'Lovelace', phone: '+61 400 000 000' });
    const sub = await api.get(`/api/Subscriptions/${done.body.subscriptionId}`, { token: merchant.key });
    expect(sub.body).toMatchObject({ memberId: done.body.memberId, planId: merchant.planId, status: 'Active', paymentMethodId: done.body.paymentMethodId });
    const methods = await api.get(`/api/members/${done.body.memberId}/payment-methods`, { token: merchant.key });
    expect(methods.body).toMatchObject([{ id: done.body.paymentMethodId, type: 'Card', last4: '4242' }]);
    const stored = await db.query('select question_id, text_value, option_ids from billing.member_answers where member_id = $1 order by question_id', [done.body.memberId]);
    expect(stored.rows).toHaveLength(3);
    expect(stored.rows.find((r) => r.question_id === merchant.questions.text.id)).toMatchObject({ text_value: 'Fitness' });

    const state = await api.get(`/api/onboard/${invitationId}`, { token: customer.token });
    expect(state.body).toMatchObject({ step: 'Done', status: 'Completed', ...done.body });
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: merchant.key })).body).toMatchObject({ status: 'Completed', memberId: done.body.memberId, subscriptionId: done.body.subscriptionId });
    expect((await api.patch('/api/onboard/details', { invitationId, firstName: 'A', lastName: 'B' }, { token: customer.token })).status).toBe(409);
    expect((await api.del(`/api/Invitations/${invitationId}`, { token: merchant.key })).status).toBe(409);

    const [hook] = await receiver.waitFor(path, (reqs) => reqs.some((r) => r.payload?.type === 'onboarding.completed'));
    const event = receiver.received(path).filter((r) => r.payload?.type === 'onboarding.completed');
    expect(event).toHaveLength(1);
    expect(hook && event[0]!.verified).toBe(true);
    expect(event[0]!.payload).toMatchObject({ merchantId: merchant.id, data: { invitationId, ...done.body, planId: merchant.planId, customerAccountId: customer.accountId, email } });
    const outbox = await db.query(`select count(*)::int as n from checkout.outbox where type = 'onboarding.completed' and data->>'invitationId' = $1`, [invitationId]);
    expect(outbox.rows[0].n).toBe(1);
  });

  it("lets the merchant read the member's answers, in the questions' order, paged, and by product; another merchant gets 404", async () => {
    const merchant = await setUpOnboardingMerchant(api, admin);
    const { customer, invitationId } = await accepted(merchant);
    await fillWizard(api, customer.token, invitationId, merchant);
    const done = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const { memberId } = done.body;
    const { text, single, multi } = merchant.questions;

    const read = await api.get(`/api/members/${memberId}/answers`, { token: merchant.key });
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body).toEqual({
      items: [
        { questionId: text.id, textValue: 'Fitness', optionIds: [] },
        { questionId: single.id, textValue: null, optionIds: [single.options[1]!.id] },
        { questionId: multi.id, textValue: null, optionIds: multi.options.map((o) => o.id) },
      ],
      page: 1,
      pageSize: 50,
      totalCount: 3,
      totalPages: 1,
      hasNextPage: false,
      hasPreviousPage: false,
    });
    const second = await api.get(`/api/members/${memberId}/answers?page=2&pageSize=2`, { token: merchant.key });
    expect(second.body).toMatchObject({ items: [{ questionId: multi.id }], totalCount: 3, totalPages: 2, hasPreviousPage: true });
    expect((await api.get(`/api/members/${memberId}/answers?productId=${merchant.productId}`, { token: merchant.key })).body.totalCount).toBe(3);
    expect((await api.get(`/api/members/${memberId}/answers?productId=${randomUUID()}`, { token: merchant.key })).body).toMatchObject({ items: [], totalCount: 0 });
    expect((await api.get(`/api/members/${memberId}/answers?productId=nope`, { token: merchant.key })).status).toBe(400);

    const other = await setUpOnboardingMerchant(api, admin);
    expect((await api.get(`/api/members/${memberId}/answers`, { token: other.key })).status).toBe(404);
    expect((await api.get(`/api/members/${randomUUID()}/answers`, { token: merchant.key })).status).toBe(404);
    expect((await api.get(`/api/members/${memberId}/answers`)).status).toBe(401);
  });

  it('answers concurrent completions with one set of ids and emits onboarding.completed once', async () => {
    const { customer, invitationId } = await accepted();
    await fillWizard(api, customer.token, invitationId, m);
    const results = await Promise.all([1, 2, 3].map(() => api.post('/api/onboard/complete', { invitationId }, { token: customer.token })));
    for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(new Set(results.map((r) => JSON.stringify(r.body))).size).toBe(1);
    const memberId = results[0]!.body.memberId;
    expect((await api.get(`/api/members/${memberId}/payment-methods`, { token: m.key })).body).toHaveLength(1);
    expect((await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${memberId}`, { token: m.key })).body.totalCount).toBe(1);
    const outbox = await db.query(`select count(*)::int as n from checkout.outbox where type = 'onboarding.completed' and data->>'invitationId' = $1`, [invitationId]);
    expect(outbox.rows[0].n).toBe(1);
  });

  it('concurrent completions of different invitations of one customer to one plan: one 200, the rest 409; one invitation Completed, one onboarding.completed, one payment method', async () => {
    // Regression: each completion adopted the subscription another invitation's completion had
    // just made (it was "created since the completion started"): all answered 200 and all the
    // invitations became Completed, each emitting onboarding.completed for the one subscription.
    const email = `${unique('multi')}@example.com`;
    const invitations = [];
    for (let i = 0; i < 5; i++) invitations.push(await invite(api, m, { email }));
    const customer = await signUpCustomer(api, email);
    for (const inv of invitations) {
      const res = await api.post('/api/onboard/accept', { token: inv.token }, { token: customer.token });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      await fillWizard(api, customer.token, inv.invitationId, m);
    }
    const results = await Promise.all(invitations.map((inv) => api.post('/api/onboard/complete', { invitationId: inv.invitationId }, { token: customer.token })));
    expect(results.map((r) => r.status).sort(), JSON.stringify(results.map((r) => r.body))).toEqual([200, 409, 409, 409, 409]);
    const done = results.find((r) => r.status === 200)!.body;
    const statuses = await Promise.all(invitations.map(async (inv) => (await api.get(`/api/Invitations/${inv.invitationId}`, { token: m.key })).body.status));
    expect(statuses.filter((s) => s === 'Completed')).toHaveLength(1);
    const ids = invitations.map((inv) => inv.invitationId);
    const events = await db.query(`select count(*)::int as n from checkout.outbox where type = 'onboarding.completed' and data->>'invitationId' = any($1)`, [ids]);
    expect(events.rows[0].n).toBe(1);
    expect((await api.get(`/api/members/${done.memberId}/payment-methods`, { token: m.key })).body).toHaveLength(1);
    const added = await db.query(`select count(*)::int as n from billing.outbox where type = 'payment_method.added' and data->>'memberId' = $1`, [done.memberId]);
    expect(added.rows[0].n).toBe(1);
    expect((await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${done.memberId}`, { token: m.key })).body.totalCount).toBe(1);
  });

  it('refuses to revoke (409) while a completion holds the wizard; revoked first, the completion is 410 and nothing is enrolled', async () => {
    // Regression: a revoke sent while a completion was enrolling the customer answered 204, and the
    // completion went on: the invitation ended Completed, revoked first, with a live subscription.
    const { customer, invitationId } = await accepted();
    await fillWizard(api, customer.token, invitationId, m);
    const revoke = () => api.del(`/api/Invitations/${invitationId}`, { token: m.key });
    // A completion run holds the wizard's lease while it calls billing.
    await db.query(`update checkout.onboardings set completion_lease_until = now() + interval '30 seconds', completion_started_at = now() where invitation_id = $1`, [invitationId]);
    const refused = await revoke();
    expect(refused.status).toBe(409);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: m.key })).body).toMatchObject({ status: 'Accepted', revokedAt: null });
    // Its lease given up, the revocation goes through, and a completion after it enrols nothing.
    await db.query(`update checkout.onboardings set completion_lease_until = null where invitation_id = $1`, [invitationId]);
    expect((await revoke()).status).toBe(204);
    const late = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(late.status).toBe(410);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: m.key })).body).toMatchObject({ status: 'Revoked', completedAt: null, subscriptionId: null });
  });

  it('never both revokes and completes an invitation when the two race', async () => {
    for (let i = 0; i < 6; i++) {
      const { customer, invitationId } = await accepted();
      await fillWizard(api, customer.token, invitationId, m);
      const [done, revoked] = await Promise.all([
        api.post('/api/onboard/complete', { invitationId }, { token: customer.token }),
        new Promise((r) => setTimeout(r, 3 * i)).then(() => api.del(`/api/Invitations/${invitationId}`, { token: m.key })),
      ]);
      const inv = (await api.get(`/api/Invitations/${invitationId}`, { token: m.key })).body;
      if (revoked.status === 204) {
        expect(done.status, JSON.stringify(done.body)).toBe(410);
        expect(inv).toMatchObject({ status: 'Revoked', completedAt: null, subscriptionId: null });
      } else {
        expect(revoked.status).toBe(409);
        expect(done.status, JSON.stringify(done.body)).toBe(200);
        expect(inv).toMatchObject({ status: 'Completed', revokedAt: null, subscriptionId: done.body.subscriptionId });
      }
    }
  });

  it('converges on what an interrupted completion already made in billing', async () => {
    const { customer, invitationId, email } = await accepted();
    await fillWizard(api, customer.token, invitationId, m);
    // An earlier run got as far as the subscription, then died before recording anything.
    await db.query(`update checkout.onboardings set completion_started_at = now() - interval '1 minute' where invitation_id = $1`, [invitationId]);
    const member = await api.post('/api/Members', { merchantId: m.id, email, firstName: 'Ada', lastName: 'Lovelace' }, { token: m.key });
    const pm = await api.post(`/api/members/${member.body.id}/payment-methods`, { merchantId: m.id, ...CARD }, { token: m.key, headers: idempotent() });
    const sub = await api.post('/api/Subscriptions', { merchantId: m.id, memberId: member.body.id, planId: m.planId, paymentMethodId: pm.body.id }, { token: m.key, headers: idempotent() });
    expect(sub.status).toBe(201);

    const done = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body).toEqual({ memberId: member.body.id, paymentMethodId: pm.body.id, subscriptionId: sub.body.id });
    expect((await api.get(`/api/members/${member.body.id}/payment-methods`, { token: m.key })).body).toHaveLength(1);
    const outbox = await eventually(async () => (await db.query(`select count(*)::int as n from checkout.outbox where data->>'invitationId' = $1`, [invitationId])).rows[0].n);
    expect(outbox).toBe(1);
  });

  it('refuses (409) when the member already had a live subscription to the plan before onboarding', async () => {
    const { customer, invitationId, email } = await accepted();
    const member = await api.post('/api/Members', { merchantId: m.id, email, firstName: 'Ada', lastName: 'Lovelace' }, { token: m.key });
    const pm = await api.post(`/api/members/${member.body.id}/payment-methods`, { merchantId: m.id, type: 'Card', brand: 'Visa', last4: '1111', expiryMonth: 1, expiryYear: 2098 }, { token: m.key, headers: idempotent() });
    await api.post('/api/Subscriptions', { merchantId: m.id, memberId: member.body.id, planId: m.planId, paymentMethodId: pm.body.id }, { token: m.key, headers: idempotent() });
    await fillWizard(api, customer.token, invitationId, m);
    const res = await api.post('/api/onboard/complete', { invitationId }, { token: customer.token });
    expect(res.status).toBe(409);
    // The refused completion added nothing to the member: its one card stays its only method.
    expect((await api.get(`/api/members/${member.body.id}/payment-methods`, { token: m.key })).body.map((p: { id: string }) => p.id)).toEqual([pm.body.id]);
  });
});

describe("a stranger holding an invitation's link (accept binds it to whoever calls it)", () => {
  /**
   * Regression (probe H): the merchant invites the email of an existing member with a saved card;
   * someone else who has the link accepts it with their own account, enters a card that declines
   * and completes. The billing run then fell back to the member's saved card and charged it.
   */
  async function invitedMemberWithSavedCard() {
    const configured = await api.put(`/api/admin/merchants/${m.id}/provider`, { providerEnvironment: 'Staging', gatewayUsername: 'gw', gatewayPassword: 'gw-secret' }, { token: admin });
    expect(configured.status).toBe(200);
    const member = await createMember(api, m);
    const saved = await addPaymentMethod(api, m, member.id, { ...CARD, last4: '1111' });
    await invite(api, m, { email: member.email });
    return { member, saved, token: await emailedToken(dataDir, member.email) };
  }

  async function completeWithDecliningCard(customerToken: string, inviteToken: string) {
    const accept = await api.post('/api/onboard/accept', { token: inviteToken }, { token: customerToken });
    expect(accept.status, JSON.stringify(accept.body)).toBe(200);
    await fillWizard(api, customerToken, accept.body.invitationId, m);
    expect((await api.post('/api/onboard/payment-method', { invitationId: accept.body.invitationId, ...CARD, last4: '0002' }, { token: customerToken })).status).toBe(204);
    const done = await api.post('/api/onboard/complete', { invitationId: accept.body.invitationId }, { token: customerToken });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const billed = await api.post('/api/admin/billing-runs', { asOf: new Date(Date.now() + 60_000).toISOString() }, { token: admin });
    expect(billed.status).toBe(200);
    const charges = (await api.get(`/api/Transactions?merchantId=${m.id}&subscriptionId=${done.body.subscriptionId}`, { token: m.key })).body.items as { status: string; paymentMethodId: string }[];
    return { ...(done.body as { memberId: string; paymentMethodId: string; subscriptionId: string }), charges };
  }

  it("cannot have the invited member's saved card charged: the subscription is charged on the wizard's card only", async () => {
    const { member, saved, token } = await invitedMemberWithSavedCard();
    const stranger = await signUpCustomer(api);
    const done = await completeWithDecliningCard(stranger.token, token);
    expect(done.memberId).toBe(member.id);
    expect(done.charges.length).toBeGreaterThan(0);
    expect(done.charges.every((c) => c.paymentMethodId === done.paymentMethodId && c.status === 'Failed')).toBe(true);
    expect(done.charges.some((c) => c.paymentMethodId === saved.id)).toBe(false);
  });

  it('the member themself, with the email verified, keeps the fallback to their saved card', async () => {
    const { member, saved, token } = await invitedMemberWithSavedCard();
    const owner = await signUpCustomer(api, member.email);
    const mail = await waitForMessage(dataDir, member.email, (msg) => /verify-email\?token=/.test(msg.text));
    expect((await api.post('/api/account/verify-email', { token: tokenFromLink(mail.text, 'verify-email') })).status).toBe(204);
    const done = await completeWithDecliningCard(owner.token, token);
    expect(done.charges.find((c) => c.paymentMethodId === saved.id)?.status).toBe('Settled');
  });
});

describe('published events', () => {
  // Runs last in this file: what its completions published (and whatever else shares the platform).
  it('carry data their published schemas describe exactly, onboarding.completed among them', async () => {
    const { mismatches, types } = await eventsAgainstPublishedSchemas(db);
    expect(mismatches).toEqual([]);
    expect(types).toContain('onboarding.completed');
  });
});
