import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureBank, complete, openSession, setUpCheckoutMerchant, type CheckoutMerchant } from '../support/checkout-fixtures.js';
import { apiClient, unique, type ApiClient } from '../support/fixtures.js';
import { emailedToken, fillWizard, invite, setUpOnboardingMerchant, signUpCustomer } from '../support/onboarding-fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { webhookFixtures } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Completion is one operation across identity, billing and checkout: the checkout process, or
 * billing's during the enrolment, is killed (SIGKILL) half way through it, after each step in
 * turn, and the customer's retry converges on one account, member, payment method and
 * subscription with exactly one `checkout.completed`; likewise an onboarding completion whose
 * enrolment billing dies in. Runs its own platform: it kills and restarts the checkout and
 * billing services.
 */
const LEASE_SECONDS = 3;
let platform: TestPlatform;
let api: ApiClient;
let receiver: WebhookReceiver;
let db: pg.Client;
let m: CheckoutMerchant;
const faultDir = mkdtempSync(join(tmpdir(), 'bp-checkout-fault-'));
const faultFile = join(faultDir, 'complete-step');
const billingFaultFile = join(faultDir, 'enrol-step');
/**
 * Checkout's environment, read again at each (re)start. Recovery off: the tests show the
 * customer's retry finishing the dead attempt's work; the last describe turns it on.
 */
const checkoutEnv: Record<string, string> = { CHECKOUT_FAULT_FILE: faultFile, CHECKOUT_COMPLETION_LEASE_SECONDS: String(LEASE_SECONDS), CHECKOUT_RECOVERY_INTERVAL_MS: '0', OUTBOX_POLL_MS: '200' };

beforeAll(async () => {
  platform = await startTestPlatform({
    services: ['sandbox-provider', 'identity', 'billing', 'checkout', 'webhooks', 'gateway'],
    serviceEnv: {
      checkout: checkoutEnv,
      billing: { BILLING_FAULT_FILE: billingFaultFile },
    },
  });
  api = apiClient(platform.gatewayUrl!);
  db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
  receiver = await startWebhookReceiver();
  m = await setUpCheckoutMerchant(api, platform.adminToken);
  const put = await api.put(`/api/ApiKeys/${m.keyId}/webhook`, { id: m.keyId, merchantId: m.id, webhookUrl: receiver.url('/hooks'), webhookEvents: ['checkout.completed'], webhookEnabled: true }, { token: m.key });
  expect(put.status).toBe(200);
  receiver.secret('/hooks', m.signingSecret);
  const fx = webhookFixtures(api, receiver, platform.adminToken);
  await fx.settle(m.id, await fx.createKey(m.id));
}, 180_000);

afterAll(async () => {
  await db?.end();
  await receiver?.close();
  await platform?.stop();
  rmSync(faultDir, { recursive: true, force: true });
});

/**
 * Asks `send` again while the answer is 409 (another run holds the lease) or 503 (a restarted
 * service's callers reconnecting); `waited` sees each of those answers.
 */
async function retried(send: () => Promise<{ status: number; body: any }>, waited: (res: { status: number; body: any }) => void = () => undefined) {
  let res = await send();
  for (let i = 0; i < 100 && (res.status === 409 || res.status === 503); i++) {
    waited(res);
    await new Promise((r) => setTimeout(r, 200));
    res = await send();
  }
  return res;
}

async function waitForExit(name: string): Promise<void> {
  const svc = platform.processes[name]!;
  for (let i = 0; i < 200 && svc.running(); i++) await new Promise((r) => setTimeout(r, 50));
  expect(svc.running()).toBe(false);
}

describe('checkout completion killed half way', () => {
  const faults = [
    { service: 'checkout', step: 'after-customer' },
    { service: 'billing', step: 'enrol-after-member' },
    { service: 'billing', step: 'enrol-after-payment-method' },
    { service: 'checkout', step: 'after-enrolment' },
  ] as const;
  for (const { service, step } of faults) {
    it(`converges on one subscription and one checkout.completed when the ${service} process dies ${step.replace(/-/g, ' ')}`, async () => {
      const email = `${unique('killed')}@example.com`;
      const s = await openSession(api, m, { customer: { email, firstName: 'Half', lastName: 'Way' } });
      const token = await captureBank(api, s);
      writeFileSync(service === 'checkout' ? faultFile : billingFaultFile, step);
      const first = await complete(api, s, token);
      expect(first.status).toBeGreaterThanOrEqual(500);
      await waitForExit(service);
      await platform.processes[service]!.start();

      // The retry finishes the dead attempt's work; while its lease lasts the answer is Pending,
      // and while the restarted service's callers reconnect to it, 503 (retry shortly).
      const done = await retried(
        () => complete(api, s, token),
        (res) => {
          if (res.status === 409) expect(res.body.status).toBe('Pending');
        },
      );
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect(done.body).toEqual({ status: 'Completed', returnUrl: 'https://shop.example/thanks', failureReason: null });
      expect((await complete(api, s, token)).status).toBe(200);

      const members = await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(email)}`, { token: m.key });
      expect(members.body.items).toHaveLength(1);
      const memberId = members.body.items[0].id;
      const subs = await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${memberId}`, { token: m.key });
      expect(subs.body.items).toHaveLength(1);
      const methods = await api.get(`/api/members/${memberId}/payment-methods`, { token: m.key });
      expect(methods.body).toHaveLength(1);
      const accounts = await db.query(`select count(*)::int as n from identity.customer_accounts where email = $1`, [email]);
      expect(accounts.rows[0].n).toBe(1);
      const events = await db.query(`select data from checkout.outbox where type = 'checkout.completed' and data->>'sessionId' = $1`, [s.sessionId]);
      expect(events.rows).toHaveLength(1);
      expect(events.rows[0].data).toMatchObject({ memberId, subscriptionId: subs.body.items[0].id, paymentMethodId: methods.body[0].id, planId: m.planId, email });

      await receiver.waitFor('/hooks', (r) => r.some((x) => x.payload?.data?.sessionId === s.sessionId));
      await new Promise((r) => setTimeout(r, 1000));
      const hooks = receiver.received('/hooks').filter((x) => x.payload?.data?.sessionId === s.sessionId);
      expect(hooks).toHaveLength(1);
      expect(hooks[0]!.verified).toBe(true);
      expect(hooks[0]!.payload.data.subscriptionId).toBe(subs.body.items[0].id);
    });
  }
});

/** A fresh onboarding merchant's invitation, accepted by the invitee and filled in, ready to complete. */
async function filledWizard() {
  const om = await setUpOnboardingMerchant(api, platform.adminToken);
  const inv = await invite(api, om);
  const customer = await signUpCustomer(api, inv.email);
  const accepted = await api.post('/api/onboard/accept', { token: await emailedToken(platform.dataDir, inv.email) }, { token: customer.token });
  expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
  await fillWizard(api, customer.token, inv.invitationId, om);
  return { om, inv, customer };
}

describe('onboarding completion with billing killed half way through its enrolment', () => {
  for (const step of ['enrol-after-member', 'enrol-after-payment-method'] as const) {
    it(`converges on one member, payment method and subscription, answers saved and one onboarding.completed, when billing dies ${step.replace(/-/g, ' ')}`, async () => {
      const { om, inv, customer } = await filledWizard();
      const complete = () => api.post('/api/onboard/complete', { invitationId: inv.invitationId }, { token: customer.token });

      writeFileSync(billingFaultFile, step);
      const first = await complete();
      expect(first.status).toBeGreaterThanOrEqual(500);
      await waitForExit('billing');
      await platform.processes.billing!.start();

      const done = await retried(complete);
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect((await complete()).body).toEqual(done.body);
      const members = await api.get(`/api/Members?merchantId=${om.id}&email=${encodeURIComponent(inv.email)}`, { token: om.key });
      expect(members.body.items.map((x: { id: string }) => x.id)).toEqual([done.body.memberId]);
      const methods = await api.get(`/api/members/${done.body.memberId}/payment-methods`, { token: om.key });
      expect(methods.body.map((x: { id: string }) => x.id)).toEqual([done.body.paymentMethodId]);
      const subs = await api.get(`/api/Subscriptions?merchantId=${om.id}&memberId=${done.body.memberId}`, { token: om.key });
      expect(subs.body.items.map((x: { id: string }) => x.id)).toEqual([done.body.subscriptionId]);
      const answers = await db.query('select count(*)::int as n from billing.member_answers where member_id = $1', [done.body.memberId]);
      expect(answers.rows[0].n).toBe(3);
      const events = await db.query(`select data from checkout.outbox where type = 'onboarding.completed' and data->>'invitationId' = $1`, [inv.invitationId]);
      expect(events.rows.map((r) => r.data.subscriptionId)).toEqual([done.body.subscriptionId]);
    });
  }
});

/**
 * Regression (probe F): a completion whose checkout process died after the enrolment left a
 * charged subscription in billing and the session Open (the invitation Accepted), with no
 * completion event, unless the customer pressed Subscribe again. The recovery job finishes it.
 */
describe('a completion whose customer never retries, finished by the recovery job', () => {
  async function withRecovery<T>(fn: () => Promise<T>): Promise<T> {
    const restart = async (interval: string) => {
      await platform.processes.checkout!.stop();
      checkoutEnv.CHECKOUT_RECOVERY_INTERVAL_MS = interval;
      await platform.processes.checkout!.start();
    };
    await restart('500');
    try {
      return await fn();
    } finally {
      await restart('0');
    }
  }

  async function eventually<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 30_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const v = await read();
      if (done(v) || Date.now() > end) return v;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('a checkout session: Completed with one checkout.completed naming the subscription billing made', async () => {
    await withRecovery(async () => {
      const email = `${unique('walked')}@example.com`;
      const s = await openSession(api, m, { customer: { email, firstName: 'Walked', lastName: 'Away' } });
      const token = await captureBank(api, s);
      writeFileSync(faultFile, 'after-enrolment');
      expect((await complete(api, s, token)).status).toBeGreaterThanOrEqual(500);
      await waitForExit('checkout');
      await platform.processes.checkout!.start();
      const status = await eventually(
        async () => (await db.query(`select status from checkout.sessions where id = $1`, [s.sessionId])).rows[0].status as string,
        (v) => v === 'Completed',
      );
      expect(status).toBe('Completed');
      const members = await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(email)}`, { token: m.key });
      const subs = await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${members.body.items[0].id}`, { token: m.key });
      expect(subs.body.items).toHaveLength(1);
      const events = await db.query(`select data from checkout.outbox where type = 'checkout.completed' and data->>'sessionId' = $1`, [s.sessionId]);
      expect(events.rows).toHaveLength(1);
      expect(events.rows[0].data.subscriptionId).toBe(subs.body.items[0].id);
      // The customer coming back later sees it completed.
      expect((await complete(api, s, token)).body.status).toBe('Completed');
    });
  });

  it('an onboarding: the invitation Completed with one onboarding.completed', async () => {
    await withRecovery(async () => {
      const { om, inv, customer } = await filledWizard();
      writeFileSync(faultFile, 'onboarding-after-enrolment');
      expect((await api.post('/api/onboard/complete', { invitationId: inv.invitationId }, { token: customer.token })).status).toBeGreaterThanOrEqual(500);
      await waitForExit('checkout');
      await platform.processes.checkout!.start();
      const read = await eventually(
        async () => (await api.get(`/api/Invitations/${inv.invitationId}`, { token: om.key })).body,
        (b: { status: string; subscriptionId?: string }) => b.status === 'Completed',
      );
      expect(read).toMatchObject({ status: 'Completed', memberId: expect.any(String), subscriptionId: expect.any(String) });
      const events = await db.query(`select data from checkout.outbox where type = 'onboarding.completed' and data->>'invitationId' = $1`, [inv.invitationId]);
      expect(events.rows).toHaveLength(1);
      expect(events.rows[0].data.subscriptionId).toBe(read.subscriptionId);
    });
  });
});
