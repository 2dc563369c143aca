import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { outboxEvents, setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, createMerchantUser, unique } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const db = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
afterAll(() => db.end());

const MEMBER_FIELDS = ['id', 'merchantId', 'email', 'firstName', 'lastName', 'phone', 'createdAt', 'updatedAt'];

let a: TestMerchant;
let b: TestMerchant;

beforeAll(async () => {
  a = await setUpMerchant(api, admin);
  b = await setUpMerchant(api, admin);
});

const create = (body: Record<string, unknown>, m: TestMerchant = a, token = m.key) => api.post('/api/Members', { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', ...body }, { token });

describe('POST /api/Members', () => {
  it('creates a member (201, Location) and records member.created', async () => {
    const email = `${unique('ada')}@example.com`;
    const res = await create({ email, phone: '+61 400 000 000' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/api/Members/${res.body.id}`);
    expect(Object.keys(res.body).sort()).toEqual([...MEMBER_FIELDS].sort());
    expect(res.body).toMatchObject({ merchantId: a.id, email, firstName: 'Ada', lastName: 'Lovelace', phone: '+61 400 000 000' });
    const read = await api.get(`/api/Members/${res.body.id}`, { token: a.key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
    const events = await outboxEvents(db, 'member.created', res.body.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.merchant_id).toBe(a.id);
    expect(events[0]!.data).toMatchObject({ id: res.body.id, email, merchantId: a.id });
  });

  it('stores the phone exactly as sent, an empty one too; without one it is null', async () => {
    for (const [phone, expected] of [['', ''], [' 0400 ', ' 0400 '], [undefined, null], [null, null]] as const) {
      const res = await create({ email: `${unique('phone')}@example.com`, ...(phone === undefined ? {} : { phone }) });
      expect(res.status).toBe(201);
      expect(res.body.phone).toBe(expected);
      expect((await api.get(`/api/Members/${res.body.id}`, { token: a.key })).body.phone).toBe(expected);
    }
  });

  it('returns the existing member unchanged (200) for the same email in any case', async () => {
    const email = `${unique('Grace')}@Example.com`;
    const first = await create({ email });
    expect(first.status).toBe(201);
    const again = await create({ email: email.toUpperCase(), firstName: 'Someone', lastName: 'Else' });
    expect(again.status).toBe(200);
    expect(again.headers.get('location')).toBeNull();
    expect(again.body).toEqual(first.body);
    expect(await outboxEvents(db, 'member.created', first.body.id)).toHaveLength(1);
  });

  it('keeps emails unique per merchant only', async () => {
    const email = `${unique('shared')}@example.com`;
    const inA = await create({ email }, a);
    const inB = await create({ email }, b);
    expect([inA.status, inB.status]).toEqual([201, 201]);
    expect(inA.body.id).not.toBe(inB.body.id);
  });

  it('makes one member of 20 concurrent creates with one email', async () => {
    const email = `${unique('race')}@example.com`;
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => create({ email: i % 2 ? email.toUpperCase() : email })));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(19);
    const ids = new Set(results.map((r) => r.body.id));
    expect(ids.size).toBe(1);
    const [id] = [...ids];
    const list = await api.get(`/api/Members?merchantId=${a.id}&email=${encodeURIComponent(email)}`, { token: a.key });
    expect(list.body.totalCount).toBe(1);
    const rows = await db.query('select count(*)::int as n from billing.members where merchant_id = $1 and lower(email) = lower($2)', [a.id, email]);
    expect(rows.rows[0].n).toBe(1);
    expect(await outboxEvents(db, 'member.created', id)).toHaveLength(1);
  });

  it('validates the body', async () => {
    const res = await api.post('/api/Members', { merchantId: a.id, email: 'not-an-email', firstName: '', phone: 'x'.repeat(51) }, { token: a.key });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['email', 'firstName', 'lastName', 'phone']);
  });

  it('checks the merchant and role of the caller', async () => {
    expect((await create({ email: `${unique()}@example.com` }, b, a.key)).status).toBe(403);
    expect((await api.post('/api/Members', { merchantId: randomUUID(), email: `${unique()}@example.com`, firstName: 'A', lastName: 'B' }, { token: a.key })).status).toBe(404);
    const viewer = await createMerchantUser(api, admin, a.id, 'Viewer');
    const staff = await createMerchantUser(api, admin, a.id, 'Staff');
    expect((await create({ email: `${unique()}@example.com` }, a, viewer.token)).status).toBe(403);
    expect((await create({ email: `${unique()}@example.com` }, a, staff.token)).status).toBe(201);
    expect((await create({ email: `${unique()}@example.com` }, a, admin)).status).toBe(201);
    expect((await api.post('/api/Members', { merchantId: a.id, email: `${unique()}@example.com`, firstName: 'A', lastName: 'B' })).status).toBe(401);
  });
});

describe('reading members', () => {
  it("hides another merchant's member (404)", async () => {
    const inB = await create({ email: `${unique()}@example.com` }, b);
    expect((await api.get(`/api/Members/${inB.body.id}`, { token: a.key })).status).toBe(404);
    expect((await api.get(`/api/Members/${randomUUID()}`, { token: a.key })).status).toBe(404);
    expect((await api.get(`/api/Members/${inB.body.id}`, { token: admin })).status).toBe(200);
  });

  it('lists paged, and filters by email case-insensitively', async () => {
    const email = `${unique('Find')}@example.com`;
    const member = (await create({ email })).body;
    const found = await api.get(`/api/Members?merchantId=${a.id}&email=${encodeURIComponent(email.toUpperCase())}`, { token: a.key });
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({ totalCount: 1, page: 1, totalPages: 1, hasNextPage: false });
    expect(found.body.items).toEqual([member]);
    const page = await api.get(`/api/Members?page=2&pageSize=2`, { token: a.key });
    expect(page.body).toMatchObject({ page: 2, pageSize: 2, hasPreviousPage: true });
    expect(page.body.items).toHaveLength(2);
    expect(page.body.items.every((m: { merchantId: string }) => m.merchantId === a.id)).toBe(true);
    expect((await api.get(`/api/Members?merchantId=${b.id}`, { token: a.key })).status).toBe(403);
  });
});
