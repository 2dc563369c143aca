import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { createApiKey, unique, type ApiClient } from './fixtures.js';
import { setUpMerchant, type TestMerchant } from './billing-fixtures.js';

/** A merchant with a plan and an API key whose signing secret is known (to sign links). */
export interface CheckoutMerchant extends TestMerchant {
  keyId: string;
  signingSecret: string;
}

export async function setUpCheckoutMerchant(api: ApiClient, adminToken: string, plan: Record<string, unknown> = {}): Promise<CheckoutMerchant> {
  const m = await setUpMerchant(api, adminToken, plan);
  const k = await createApiKey(api, adminToken, m.id);
  return { ...m, key: k.key, keyId: k.id, signingSecret: k.signingSecret };
}

/** Signs a link the way a merchant's own code would (contract §6), independently of the service. */
export function signLink(secret: string, payload: Record<string, unknown>): { d: string; s: string } {
  const d = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
  const s = createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64')).update(d, 'ascii').digest('base64url');
  return { d, s };
}

export function linkPayload(m: CheckoutMerchant, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    v: 1,
    kid: m.keyId,
    mid: m.id,
    pid: m.planId,
    nonce: randomUUID(),
    exp: Math.floor(Date.now() / 1000) + 3600,
    returnUrl: 'https://shop.example/thanks',
    customer: { email: `${unique('buyer')}@example.com`, firstName: 'Grace', lastName: 'Hopper' },
    ...extra,
  };
}

/** Resolves a freshly signed link; returns the session and its token. */
export async function openSession(api: ApiClient, m: CheckoutMerchant, extra: Record<string, unknown> = {}) {
  const payload = linkPayload(m, extra);
  const link = signLink(m.signingSecret, payload);
  const res = await api.post('/api/Checkout/sessions/resolve', link);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ...link, payload, sessionId: res.body.sessionId as string, token: res.body.sessionToken as string };
}

export const GOOD_BANK = { accountName: 'Grace Hopper', bsb: '062-000', accountNumber: '12345678' };

export async function captureBank(api: ApiClient, session: { sessionId: string; token: string }, bank: Record<string, unknown> = GOOD_BANK) {
  const res = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: session.sessionId, ...bank }, { token: session.token });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.providerToken as string;
}

export async function complete(api: ApiClient, session: { sessionId: string; token: string }, providerToken: string) {
  return api.post('/api/Checkout/sessions/me/complete', { sessionId: session.sessionId, providerToken }, { token: session.token });
}
