import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { addPaymentMethod, BANK, CARD, createMember, idempotent, outboxEvents, setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, createMerchantUser } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const sandboxUrl = inject('sandboxProviderUrl');
const db = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });

const PAYMENT_METHOD_FIELDS = ['id', 'merchantId', 'memberId', 'type', 'brand', 'last4', 'expiryMonth', 'expiryYear', 'accountName', 'bsb', 'rank', 'isDefault', 'createdAt'];

let a: TestMerchant;
let b: TestMerchant;

beforeAll(async () => {
  a = await setUpMerchant(api, admin);
  b = await setUpMerchant(api, admin);
});

afterAll(async () => {
  await sandbox('DELETE', '/__sandbox/faults');
  await db.end();
});

/** Calls the sandbox payment provider directly, on behalf of a merchant account. */
async function sandbox(method: string, path: string, body?: unknown, account?: string): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (account) headers['sandbox-account'] = account;
  const res = await fetch(new URL(path, sandboxUrl), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
}

const add = (memberId: string, body: Record<string, unknown>, token = a.key) =>
  api.post(`/api/members/${memberId}/payment-methods`, { merchantId: a.id, ...body }, { token, headers: idempotent() });
const fromToken = (memberId: string, providerToken: string, m: TestMerchant = a) =>
  api.post(`/api/members/${memberId}/payment-methods/from-token`, { merchantId: m.id, providerToken }, { token: m.key, headers: idempotent() });
const list = async (memberId: string) => {
  const res = await api.get(`/api/members/${memberId}/payment-methods`, { token: a.key });
  expect(res.status).toBe(200);
  return res.body as { id: string; rank: number; isDefault: boolean }[];
};
const reorder = (memberId: string, body: Record<string, unknown>, token = a.key) => api.post(`/api/members/${memberId}/payment-methods/reorder`, body, { token });

describe('adding payment methods', () => {
  it('adds a card (201, Location), the first becoming the default, and records payment_method.added', async () => {
    const member = await createMember(api, a);
    const res = await add(member.id, CARD);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/api/members/${member.id}/payment-methods/${res.body.id}`);
    expect(Object.keys(res.body).sort()).toEqual([...PAYMENT_METHOD_FIELDS].sort());
    expect(res.body).toMatchObject({ memberId: member.id, merchantId: a.id, type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2099, accountName: null, bsb: null, rank: 1, isDefault: true });
    expect((await api.get(`/api/members/${member.id}/payment-methods/${res.body.id}`, { token: a.key })).body).toEqual(res.body);
    // An id of the uuid shape without RFC 9562's version digit names nothing: 404, as in every path, not 400.
    expect((await api.get(`/api/members/${member.id}/payment-methods/00000000-0000-0000-0000-000000000001`, { token: a.key })).status).toBe(404);
    const events = await outboxEvents(db, 'payment_method.added', res.body.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ id: res.body.id, memberId: member.id, last4: '4242', isDefault: true });
  });

  it('appends a bank account at the next rank, keeping the BSB as sent', async () => {
    const member = await createMember(api, a);
    await addPaymentMethod(api, a, member.id);
    const res = await add(member.id, { ...BANK, bsb: '062000' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ type: 'BankAccount', accountName: 'Ada Lovelace', bsb: '062000', last4: '1234', expiryMonth: null, rank: 2, isDefault: false });
    expect((await add(member.id, { ...BANK, bsb: '062-001' })).body.bsb).toBe('062-001');
    // Not trimmed into shape either: a BSB with spaces is 400.
    expect((await add(member.id, { ...BANK, bsb: ' 062000' })).body.errors).toHaveProperty('bsb');
  });

  it('refuses full card or account numbers, and malformed tokenisation results', async () => {
    const member = await createMember(api, a);
    const full = await add(member.id, { ...CARD, cardNumber: '4242424242424242', cvv: '123' });
    expect(full.status).toBe(400);
    expect(Object.keys(full.body.errors).sort()).toEqual(['cardNumber', 'cvv']);
    expect(JSON.stringify(full.body)).not.toContain('4242424242424242');
    expect((await add(member.id, { ...BANK, accountNumber: '12345678' })).body.errors).toHaveProperty('accountNumber');
    // Any spelling of those names (a client serialising in PascalCase, snake or kebab case) is refused too, named as sent.
    const spelled = await add(member.id, { ...CARD, CardNumber: '4242424242424242', CVV: '123', 'account-number': '12345678', PAN: '4242424242424242' });
    expect(spelled.status).toBe(400);
    expect(Object.keys(spelled.body.errors).sort()).toEqual(['CVV', 'CardNumber', 'PAN', 'account-number']);
    expect(JSON.stringify(spelled.body)).not.toContain('4242424242424242');
    // A full number in a text field (a form that put it in the wrong box) is refused too, and not echoed.
    const inBrand = await add(member.id, { ...CARD, brand: 'Visa 4242 4242 4242 4242' });
    expect(inBrand.status).toBe(400);
    expect(inBrand.body.errors).toEqual({ brand: ['Must not hold a card number; send only its last4.'] });
    expect(JSON.stringify(inBrand.body)).not.toContain('4242 4242');
    expect((await add(member.id, { ...BANK, accountName: '4111-1111-1111-1111' })).body.errors).toHaveProperty('accountName');
    expect((await add(member.id, { ...CARD, last4: '424' })).body.errors).toHaveProperty('last4');
    expect((await add(member.id, { ...CARD, last4: '42a2' })).body.errors).toHaveProperty('last4');
    expect((await add(member.id, { ...CARD, expiryYear: 2001 })).body.errors).toHaveProperty('expiryYear');
    expect(Object.keys((await add(member.id, { type: 'Card', last4: '4242' })).body.errors).sort()).toEqual(['expiryMonth', 'expiryYear']);
    expect(Object.keys((await add(member.id, { type: 'BankAccount', last4: '1234' })).body.errors).sort()).toEqual(['accountName', 'bsb']);
    expect((await add(member.id, { ...BANK, bsb: '12-34' })).body.errors).toHaveProperty('bsb');
    expect((await add(member.id, { ...CARD, type: 'Cheque' })).body.errors).toHaveProperty('type');
    expect(await list(member.id)).toEqual([]);
  });

  it('requires an Idempotency-Key and replays a retry', async () => {
    const member = await createMember(api, a);
    const noKey = await api.post(`/api/members/${member.id}/payment-methods`, { merchantId: a.id, ...CARD }, { token: a.key });
    expect(noKey.status).toBe(400);
    const headers = idempotent();
    const first = await api.post(`/api/members/${member.id}/payment-methods`, { merchantId: a.id, ...CARD }, { token: a.key, headers });
    const retry = await api.post(`/api/members/${member.id}/payment-methods`, { merchantId: a.id, ...CARD }, { token: a.key, headers });
    expect([first.status, retry.status]).toEqual([201, 201]);
    expect(retry.body).toEqual(first.body);
    expect(await list(member.id)).toHaveLength(1);
  });

  it("checks the member, the merchant and the role", async () => {
    const memberOfB = await createMember(api, b);
    expect((await add(memberOfB.id, CARD)).status).toBe(404);
    expect((await add(randomUUID(), CARD)).status).toBe(404);
    const member = await createMember(api, a);
    expect((await add(member.id, { ...CARD, memberId: randomUUID() })).status).toBe(400);
    expect((await add(member.id, { ...CARD, merchantId: b.id })).status).toBe(403);
    const viewer = await createMerchantUser(api, admin, a.id, 'Viewer');
    expect((await add(member.id, CARD, viewer.token)).status).toBe(403);
    expect((await api.get(`/api/members/${member.id}/payment-methods`, { token: viewer.token })).status).toBe(200);
    expect((await api.get(`/api/members/${memberOfB.id}/payment-methods`, { token: a.key })).status).toBe(404);
  });
});

describe('reordering payment methods', () => {
  async function memberWithThree() {
    const member = await createMember(api, a);
    const ids = [];
    for (const details of [CARD, BANK, { ...CARD, last4: '1111' }]) ids.push((await addPaymentMethod(api, a, member.id, details)).id);
    return { memberId: member.id, ids };
  }

  it('ranks the full set in the given order; the first becomes the default (200 with the ordered array)', async () => {
    const { memberId, ids } = await memberWithThree();
    const [x, y, z] = ids as [string, string, string];
    const res = await reorder(memberId, { memberId, merchantId: a.id, orderedIds: [z, x, y] });
    expect(res.status).toBe(200);
    expect(res.body.map((m: { id: string }) => m.id)).toEqual([z, x, y]);
    expect(res.body.map((m: { rank: number }) => m.rank)).toEqual([1, 2, 3]);
    expect(res.body.map((m: { isDefault: boolean }) => m.isDefault)).toEqual([true, false, false]);
    expect((await list(memberId)).map((m) => m.id)).toEqual([z, x, y]);
  });

  it('refuses a set with a method missing, extra or twice (400), changing nothing', async () => {
    const { memberId, ids } = await memberWithThree();
    const [x, y, z] = ids as [string, string, string];
    for (const orderedIds of [[z, x], [z, x, y, randomUUID()], [z, x, y, y], [z, z, x], [], null]) {
      const res = await reorder(memberId, { orderedIds });
      expect(res.status, JSON.stringify(orderedIds)).toBe(400);
      expect(res.body.errors).toHaveProperty('orderedIds');
    }
    expect((await list(memberId)).map((m) => m.id)).toEqual([x, y, z]);
  });

  it('checks the body memberId and merchantId', async () => {
    const { memberId, ids } = await memberWithThree();
    expect((await reorder(memberId, { memberId: randomUUID(), orderedIds: ids })).status).toBe(400);
    expect((await reorder(memberId, { merchantId: b.id, orderedIds: ids })).status).toBe(403);
    expect((await reorder(memberId, { merchantId: randomUUID(), orderedIds: ids })).status).toBe(404);
    expect((await reorder(randomUUID(), { orderedIds: ids })).status).toBe(404);
  });
});

describe('adding from a payment-provider token', () => {
  it('stores what the provider says a bank token stands for', async () => {
    const member = await createMember(api, a);
    const token = await sandbox('POST', '/v1/bank-tokens', { accountName: 'Ada Lovelace', bsb: '062-000', accountNumber: '123456789' }, a.id);
    expect(token.status).toBe(201);
    const res = await fromToken(member.id, token.body.token);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ type: 'BankAccount', last4: '6789', bsb: '062-000', accountName: 'Ada Lovelace', rank: 1, isDefault: true });
    expect(await outboxEvents(db, 'payment_method.added', res.body.id)).toHaveLength(1);
    const again = await fromToken(member.id, token.body.token);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(res.body.id);
    const other = await createMember(api, a);
    expect((await fromToken(other.id, token.body.token)).status).toBe(400);
  });

  it('stores a card token', async () => {
    const member = await createMember(api, a);
    const token = await sandbox('POST', '/v1/card-tokens', { number: '5555555555554444', expiryMonth: 8, expiryYear: 2098 }, a.id);
    const res = await fromToken(member.id, token.body.token);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ type: 'Card', brand: 'Mastercard', last4: '4444', expiryMonth: 8, expiryYear: 2098 });
  });

  it("refuses an unknown token and another merchant's token (400)", async () => {
    const member = await createMember(api, a);
    const unknown = await fromToken(member.id, 'btok_doesnotexist');
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toHaveProperty('providerToken');
    const tokenOfB = await sandbox('POST', '/v1/bank-tokens', { accountName: 'B', bsb: '062-000', accountNumber: '11112222' }, b.id);
    expect((await fromToken(member.id, tokenOfB.body.token)).status).toBe(400);
  });

  it('answers 502 provider_unavailable while the provider is down or unreachable, and works again after', async () => {
    const member = await createMember(api, a);
    const token = await sandbox('POST', '/v1/bank-tokens', { accountName: 'Ada', bsb: '062-000', accountNumber: '55556666' }, a.id);
    expect((await sandbox('POST', '/__sandbox/faults', { down: true, account: a.id })).status).toBe(200);
    const down = await fromToken(member.id, token.body.token);
    expect(down.status).toBe(502);
    expect(down.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(down.body.type).toMatch(/provider-unavailable$/);
    await sandbox('POST', '/__sandbox/faults', { down: false, dropConnections: true, account: a.id });
    expect((await fromToken(member.id, token.body.token)).status).toBe(502);
    await sandbox('POST', '/__sandbox/faults', { dropConnections: false, latencyMs: 4000, account: a.id });
    expect((await fromToken(member.id, token.body.token)).status).toBe(502); // past the 3 s provider timeout
    await sandbox('DELETE', `/__sandbox/faults?account=${a.id}`);
    expect(await list(member.id)).toEqual([]);
    expect((await fromToken(member.id, token.body.token)).status).toBe(201);
  });
});
