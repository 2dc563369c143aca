import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { createApiKey, createMerchant, unique, type ApiClient } from './fixtures.js';

/** A merchant with an API key (Admin reach), one product and one monthly AUD plan. */
export interface TestMerchant {
  id: string;
  key: string;
  productId: string;
  planId: string;
}

export async function setUpMerchant(api: ApiClient, adminToken: string, plan: Record<string, unknown> = {}): Promise<TestMerchant> {
  const m = await createMerchant(api, adminToken);
  const { key } = await createApiKey(api, adminToken, m.id);
  const product = await api.post('/api/Products', { merchantId: m.id, name: `Product ${unique()}` }, { token: key });
  expect(product.status).toBe(201);
  const created = await api.post('/api/Plans', { merchantId: m.id, productId: product.body.id, name: 'Monthly', amount: 19.95, interval: 'Month', ...plan }, { token: key });
  expect(created.status).toBe(201);
  return { id: m.id, key, productId: product.body.id, planId: created.body.id };
}

export async function createMember(api: ApiClient, m: { id: string; key: string }, extra: Record<string, unknown> = {}): Promise<{ id: string; email: string }> {
  const res = await api.post('/api/Members', { merchantId: m.id, email: `${unique('member')}@example.com`, firstName: 'Ada', lastName: 'Lovelace', ...extra }, { token: m.key });
  expect(res.status).toBe(201);
  return res.body;
}

/** Headers with a fresh Idempotency-Key. */
export const idempotent = (key: string = randomUUID()) => ({ 'idempotency-key': key });

export const CARD = { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2099 } as const;
export const BANK = { type: 'BankAccount', accountName: 'Ada Lovelace', bsb: '062-000', last4: '1234' } as const;

export async function addPaymentMethod(api: ApiClient, m: { id: string; key: string }, memberId: string, details: Record<string, unknown> = CARD) {
  const res = await api.post(`/api/members/${memberId}/payment-methods`, { merchantId: m.id, ...details }, { token: m.key, headers: idempotent() });
  expect(res.status).toBe(201);
  return res.body as { id: string; rank: number; isDefault: boolean };
}

/** Rows of the billing outbox for one event type whose data.id is `id`. */
export async function outboxEvents(db: { query: (sql: string, params: unknown[]) => Promise<{ rows: any[] }> }, type: string, id: string) {
  const res = await db.query(`select type, merchant_id, data from billing.outbox where type = $1 and data->>'id' = $2`, [type, id]);
  return res.rows as { type: string; merchant_id: string; data: Record<string, any> }[];
}
