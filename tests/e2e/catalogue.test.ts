import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, createMerchantUser } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');

const PRODUCT_FIELDS = ['id', 'merchantId', 'name', 'description', 'createdAt', 'updatedAt'];
const PLAN_FIELDS = ['id', 'merchantId', 'productId', 'name', 'amount', 'currency', 'interval', 'intervalCount', 'trialDays', 'isActive', 'createdAt', 'updatedAt'];
const QUESTION_FIELDS = ['id', 'productId', 'text', 'kind', 'required', 'order', 'options', 'createdAt'];

let a: TestMerchant;
let b: TestMerchant;

beforeAll(async () => {
  a = await setUpMerchant(api, admin);
  b = await setUpMerchant(api, admin);
});

describe('products', () => {
  it('creates a product (201, Location) and reads it back', async () => {
    const res = await api.post('/api/Products', { merchantId: a.id, name: 'Gym membership', description: 'All clubs' }, { token: a.key });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/api/Products/${res.body.id}`);
    expect(Object.keys(res.body).sort()).toEqual([...PRODUCT_FIELDS].sort());
    expect(res.body).toMatchObject({ merchantId: a.id, name: 'Gym membership', description: 'All clubs' });
    const read = await api.get(`/api/products/${res.body.id}`, { token: a.key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
  });

  it('validates the body and the merchant named in it', async () => {
    const bad = await api.post('/api/Products', { merchantId: a.id, name: '' }, { token: a.key });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toHaveProperty('name');
    expect((await api.post('/api/Products', { merchantId: b.id, name: 'x' }, { token: a.key })).status).toBe(403);
    expect((await api.post('/api/Products', { merchantId: randomUUID(), name: 'x' }, { token: a.key })).status).toBe(404);
    expect((await api.post('/api/Products', { merchantId: a.id, name: 'x' })).status).toBe(401);
  });

  it("hides another merchant's product (404) and lists only the merchant's own, paged", async () => {
    expect((await api.get(`/api/Products/${b.productId}`, { token: a.key })).status).toBe(404);
    expect((await api.get(`/api/Products/${randomUUID()}`, { token: a.key })).status).toBe(404);
    const list = await api.get(`/api/Products?merchantId=${a.id}&page=1&pageSize=1`, { token: a.key });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ page: 1, pageSize: 1, hasPreviousPage: false });
    expect(list.body.totalCount).toBeGreaterThanOrEqual(2);
    expect(list.body.items).toHaveLength(1);
    expect(list.body.items[0].merchantId).toBe(a.id);
    const all = await api.get('/api/Products?pageSize=200', { token: a.key });
    expect(all.body.items.every((p: { merchantId: string }) => p.merchantId === a.id)).toBe(true);
    expect((await api.get(`/api/Products?merchantId=${b.id}`, { token: a.key })).status).toBe(403);
  });

  it('lets a Viewer read but not write, and an Admin write', async () => {
    const viewer = await createMerchantUser(api, admin, a.id, 'Viewer');
    const staff = await createMerchantUser(api, admin, a.id, 'Staff');
    const adminUser = await createMerchantUser(api, admin, a.id, 'Admin');
    expect((await api.get(`/api/Products/${a.productId}`, { token: viewer.token })).status).toBe(200);
    expect((await api.post('/api/Products', { merchantId: a.id, name: 'x' }, { token: viewer.token })).status).toBe(403);
    expect((await api.post('/api/Products', { merchantId: a.id, name: 'x' }, { token: staff.token })).status).toBe(403);
    expect((await api.post('/api/Products', { merchantId: a.id, name: 'x' }, { token: adminUser.token })).status).toBe(201);
  });
});

describe('plans', () => {
  it('creates a plan with decimal amount and defaults', async () => {
    const res = await api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'Monthly', amount: 19.95, interval: 'Month' }, { token: a.key });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/api/Plans/${res.body.id}`);
    expect(Object.keys(res.body).sort()).toEqual([...PLAN_FIELDS].sort());
    expect(res.body).toMatchObject({ productId: a.productId, amount: 19.95, currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0, isActive: true });
    expect((await api.get(`/api/Plans/${res.body.id}`, { token: a.key })).body).toEqual(res.body);
    // Optional fields sent as null take their defaults, as null does on every other create.
    const nulls = await api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'Nulls', amount: 5, interval: 'Week', currency: null, intervalCount: null, trialDays: null, isActive: null }, { token: a.key });
    expect(nulls.status, JSON.stringify(nulls.body)).toBe(201);
    expect(nulls.body).toMatchObject({ currency: 'AUD', intervalCount: 1, trialDays: 0, isActive: true });
  });

  it('keeps amounts exact: 0.29 and "1234.50" round-trip, other currencies by their own decimals', async () => {
    const make = (body: Record<string, unknown>) => api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'P', interval: 'Week', ...body }, { token: a.key });
    expect((await make({ amount: 0.29 })).body.amount).toBe(0.29);
    expect((await make({ amount: '1234.50' })).body.amount).toBe(1234.5);
    const yen = await make({ amount: 1500, currency: 'jpy', interval: 'Year', intervalCount: 2, trialDays: 14, isActive: false });
    expect(yen.status).toBe(201);
    expect(yen.body).toMatchObject({ amount: 1500, currency: 'JPY', interval: 'Year', intervalCount: 2, trialDays: 14, isActive: false });
  });

  it('refuses more decimals than the currency has, non-positive amounts and bad enums', async () => {
    const make = (body: Record<string, unknown>) => api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'P', interval: 'Month', ...body }, { token: a.key });
    for (const body of [{ amount: 19.951 }, { amount: '19.950' }, { amount: 0 }, { amount: -5 }, { amount: 1.5, currency: 'JPY' }, { amount: 'abc' }]) {
      const res = await make(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors).toHaveProperty('amount');
    }
    const res = await make({ amount: 10, currency: 'XYZ', interval: 'Daily', intervalCount: 0, trialDays: -1 });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['currency', 'interval', 'intervalCount', 'trialDays']);
  });

  it("refuses a product of another merchant (404)", async () => {
    const res = await api.post('/api/Plans', { merchantId: a.id, productId: b.productId, name: 'P', amount: 10, interval: 'Month' }, { token: a.key });
    expect(res.status).toBe(404);
  });

  it('patches name and isActive only; a price or schedule change is 400', async () => {
    const plan = (await api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'Old', amount: 10, interval: 'Fortnight' }, { token: a.key })).body;
    const res = await api.patch(`/api/Plans/${plan.id}`, { isActive: false }, { token: a.key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: plan.id, name: 'Old', isActive: false, amount: 10, interval: 'Fortnight' });
    const renamed = await api.patch(`/api/Plans/${plan.id}`, { name: 'New' }, { token: a.key });
    expect(renamed.body).toMatchObject({ name: 'New', isActive: false });
    expect((await api.patch(`/api/Plans/${plan.id}`, { id: randomUUID(), name: 'x' }, { token: a.key })).status).toBe(400);
    expect((await api.patch(`/api/Plans/${plan.id}`, { name: '' }, { token: a.key })).status).toBe(400);
    // A price or schedule change is refused, not answered 200 with nothing changed.
    const repriced = await api.patch(`/api/Plans/${plan.id}`, { amount: 99, currency: 'USD' }, { token: a.key });
    expect(repriced.status).toBe(400);
    expect(Object.keys(repriced.body.errors).sort()).toEqual(['amount', 'currency']);
    expect((await api.get(`/api/Plans/${plan.id}`, { token: a.key })).body).toMatchObject({ amount: 10, currency: 'AUD', name: 'New' });
    expect((await api.patch(`/api/Plans/${b.planId}`, { name: 'x' }, { token: a.key })).status).toBe(404);
    expect((await api.patch(`/api/Plans/${plan.id}`, { merchantId: b.id, name: 'x' }, { token: a.key })).status).toBe(403);
  });

  it('lists plans paged, filtered by product and active flag', async () => {
    const res = await api.get(`/api/Plans?merchantId=${a.id}&productId=${a.productId}&isActive=true&pageSize=200`, { token: a.key });
    expect(res.status).toBe(200);
    expect(res.body.items.length).toBeGreaterThan(0);
    expect(res.body.items.every((p: { productId: string; isActive: boolean }) => p.productId === a.productId && p.isActive)).toBe(true);
    expect(res.body.totalCount).toBe(res.body.items.length);
    expect((await api.get(`/api/Plans/${b.planId}`, { token: a.key })).status).toBe(404);
  });
});

describe('questions', () => {
  let productId: string;

  beforeAll(async () => {
    productId = (await api.post('/api/Products', { merchantId: a.id, name: 'With questions' }, { token: a.key })).body.id;
  });

  const ask = (body: Record<string, unknown>, product = productId, token = a.key) => api.post(`/api/Products/${product}/questions`, { merchantId: a.id, required: false, ...body }, { token });
  const list = async (product = productId) => {
    const res = await api.get(`/api/Products/${product}/questions`, { token: a.key });
    expect(res.status).toBe(200);
    return res.body as { id: string; order: number; text: string }[];
  };

  it('creates questions of each kind, appended in order', async () => {
    const text = await ask({ text: 'Any injuries?', kind: 'Text', required: false });
    expect(text.status).toBe(201);
    expect(text.headers.get('location')).toBe(`/api/Products/${productId}/questions/${text.body.id}`);
    expect(Object.keys(text.body).sort()).toEqual([...QUESTION_FIELDS].sort());
    expect(text.body).toMatchObject({ productId, kind: 'Text', required: false, order: 1, options: [] });
    const single = await ask({ text: 'Preferred club', kind: 'SingleChoice', required: true, options: [{ label: 'City' }, { label: 'Beach' }] });
    expect(single.status).toBe(201);
    expect(single.body.order).toBe(2);
    expect(single.body.options.map((o: { label: string }) => o.label)).toEqual(['City', 'Beach']);
    expect(single.body.options.every((o: { id: string }) => /^[0-9a-f-]{36}$/.test(o.id))).toBe(true);
    const multi = await ask({ text: 'Classes', kind: 'MultiChoice', required: false, options: [{ label: 'Yoga' }] });
    expect(multi.body.order).toBe(3);
    expect((await api.get(`/api/Products/${productId}/questions/${single.body.id}`, { token: a.key })).body).toEqual(single.body);
    // An id of the uuid shape without RFC 9562's version digit names nothing: 404, as in every path, not 400.
    expect((await api.get(`/api/Products/${productId}/questions/00000000-0000-0000-0000-000000000001`, { token: a.key })).status).toBe(404);
  });

  it('validates kinds and options', async () => {
    const noOptions = await ask({ text: 'Pick', kind: 'SingleChoice', required: true });
    expect(noOptions.status).toBe(400);
    expect(noOptions.body.errors).toHaveProperty('options');
    expect((await ask({ text: 'Free', kind: 'Text', required: true, options: [{ label: 'x' }] })).status).toBe(400);
    expect((await ask({ text: 'Dup', kind: 'MultiChoice', required: true, options: [{ label: 'A' }, { label: 'a' }] })).body.errors).toHaveProperty('options[1].label');
    expect((await ask({ text: 'K', kind: 'Essay', required: true })).body.errors).toHaveProperty('kind');
    // required is a required field of the create (the reference said it defaulted to false).
    expect((await ask({ text: 'No flag', kind: 'Text', required: undefined })).body.errors).toHaveProperty('required');
    expect((await ask({ text: 'x', kind: 'Text' }, b.productId)).status).toBe(404);
    expect((await ask({ text: 'x', kind: 'Text', productId: randomUUID() })).status).toBe(400);
  });

  it('requires merchantId, text, kind and required, as the contract lists them (required defaulted to false, merchantId was optional)', async () => {
    const post = (body: Record<string, unknown>) => api.post(`/api/Products/${a.productId}/questions`, body, { token: a.key });
    const noRequired = await post({ merchantId: a.id, text: 'T?', kind: 'Text' });
    expect(noRequired.status).toBe(400);
    expect(Object.keys(noRequired.body.errors)).toEqual(['required']);
    const noMerchant = await post({ text: 'T?', kind: 'Text', required: false });
    expect(noMerchant.status).toBe(400);
    expect(Object.keys(noMerchant.body.errors)).toEqual(['merchantId']);
    expect((await post({ merchantId: a.id, text: 'T?', kind: 'Text', required: false })).status).toBe(201);
  });

  it('lists a plain array ordered by order, then id', async () => {
    const p = (await api.post('/api/Products', { merchantId: a.id, name: 'Ties' }, { token: a.key })).body.id;
    for (const text of ['one', 'two', 'three']) expect((await ask({ text, kind: 'Text', order: 5 }, p)).status).toBe(201);
    expect((await ask({ text: 'first', kind: 'Text', order: 1 }, p)).status).toBe(201);
    const items = await list(p);
    expect(Array.isArray(items)).toBe(true);
    expect(items[0]!.text).toBe('first');
    expect(items.slice(1).map((q) => q.id)).toEqual(items.slice(1).map((q) => q.id).sort());
  });

  it('reorders the listed questions and leaves the others untouched (204)', async () => {
    const before = await list();
    const [q1, q2, q3] = before as unknown as [{ id: string; order: number }, { id: string; order: number }, { id: string; order: number }];
    const res = await api.post(`/api/Products/${productId}/questions/reorder`, { productId, orders: [{ id: q3.id, order: 0 }, { id: q1.id, order: 10 }] }, { token: a.key });
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    const after = await list();
    expect(after.map((q) => q.id)).toEqual([q3.id, q2.id, q1.id]);
    expect(after.find((q) => q.id === q2.id)!.order).toBe(q2.order);
  });

  it('answers 404 for an unknown product or a question not of the product, and 400 for empty or duplicate entries', async () => {
    const [q] = await list();
    const reorder = (product: string, body: unknown) => api.post(`/api/Products/${product}/questions/reorder`, body, { token: a.key });
    expect((await reorder(randomUUID(), { orders: [{ id: q!.id, order: 1 }] })).status).toBe(404);
    expect((await reorder(b.productId, { orders: [{ id: q!.id, order: 1 }] })).status).toBe(404);
    const empty = await reorder(productId, { productId, orders: [] });
    expect(empty.status).toBe(400);
    expect(empty.body.errors).toHaveProperty('orders');
    expect((await reorder(productId, { productId })).status).toBe(400);
    // Over the limit: says so (it said "Required: an array of { id, order }.").
    const tooMany = await reorder(productId, { orders: Array.from({ length: 1001 }, (_, i) => ({ id: q!.id, order: i })) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.errors.orders).toEqual(['At most 1000 items.']);
    const otherProductQuestion = (await ask({ text: 'elsewhere', kind: 'Text' }, a.productId)).body.id;
    const foreign = await reorder(productId, { orders: [{ id: q!.id, order: 3 }, { id: otherProductQuestion, order: 4 }, { id: randomUUID(), order: 5 }] });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ status: 404, detail: expect.stringContaining('orders[1].id, orders[2].id'), traceId: expect.any(String) });
    expect(Object.keys(foreign.body.errors).sort()).toEqual(['orders[1].id', 'orders[2].id']);
    // Another merchant's question is not found either.
    const theirs = await ask({ merchantId: b.id, text: 'theirs', kind: 'Text' }, b.productId, b.key);
    expect(theirs.status).toBe(201);
    expect((await reorder(productId, { orders: [{ id: theirs.body.id, order: 1 }] })).status).toBe(404);
    const duplicate = await reorder(productId, { orders: [{ id: q!.id, order: 3 }, { id: q!.id, order: 4 }] });
    expect(duplicate.status).toBe(400);
    expect(duplicate.body.errors).toHaveProperty('orders[1].id');
    const mismatch = await reorder(productId, { productId: a.productId, orders: [{ id: q!.id, order: 3 }] });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.errors).toHaveProperty('productId');
    expect((await list())[0]!.id).toBe(q!.id); // nothing changed
  });

  it('needs the Admin role to write questions', async () => {
    const staff = await createMerchantUser(api, admin, a.id, 'Staff');
    expect((await ask({ text: 'x', kind: 'Text' }, productId, staff.token)).status).toBe(403);
    expect((await api.post(`/api/Products/${productId}/questions/reorder`, { orders: [{ id: randomUUID(), order: 1 }] }, { token: staff.token })).status).toBe(403);
    expect((await api.get(`/api/Products/${productId}/questions`, { token: staff.token })).status).toBe(200);
  });
});

