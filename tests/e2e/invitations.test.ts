import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, createMerchantUser, unique } from '../support/fixtures.js';
import { messagesTo } from '../support/mailbox.js';
import { emailedToken, invite, PASSWORD, signUpCustomer } from '../support/onboarding-fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const dataDir = inject('dataDir');
const db = new pg.Client({ connectionString: inject('databaseUrl') });

let m: TestMerchant;
beforeAll(async () => {
  await db.connect();
  m = await setUpMerchant(api, admin);
});
afterAll(() => db.end());

const body = (extra: Record<string, unknown> = {}) => ({ merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', email: `${unique('i')}@example.com`, ...extra });

describe('POST /api/Invitations', () => {
  it('answers the invitation result, emails the link with the token once, and stores only its SHA-256', async () => {
    const email = `${unique('i')}@example.com`;
    const before = Date.now();
    const res = await api.post('/api/Invitations', body({ email, phone: '+61 400 000 001', expiresInDays: 3 }), { token: m.key });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['email', 'expiresAt', 'invitationId', 'outcome', 'phone', 'token']);
    expect(res.body).toMatchObject({ outcome: 'Ok', email, phone: '+61 400 000 001' });
    expect(res.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const days = (Date.parse(res.body.expiresAt) - before) / 86_400_000;
    expect(days).toBeGreaterThan(2.99);
    expect(days).toBeLessThan(3.01);

    expect(await emailedToken(dataDir, email)).toBe(res.body.token);
    const [mail] = await messagesTo(dataDir, email);
    expect(mail!.text).toContain(`/onboard?token=${res.body.token}`);

    const row = (await db.query('select * from checkout.invitations where id = $1', [res.body.invitationId])).rows[0];
    expect(row.token_hash).toBe(createHash('sha256').update(res.body.token).digest('hex'));
    expect(JSON.stringify(row)).not.toContain(res.body.token);
    const read = await api.get(`/api/Invitations/${res.body.invitationId}`, { token: m.key });
    expect(JSON.stringify(read.body)).not.toContain(res.body.token);
  });

  it('creates an unclaimed customer account for an email without one, which sign-up then claims', async () => {
    const { email, token } = await invite(api, m);
    const preview = await api.post('/api/onboard/preview', { token });
    expect(preview.status).toBe(200);
    expect(preview.body.accountState).toBe('Unclaimed');
    await signUpCustomer(api, email);
    expect((await api.post('/api/onboard/preview', { token })).body.accountState).toBe('Claimed');
    expect((await api.post('/api/account/signup', { email, password: PASSWORD, firstName: 'A', lastName: 'B', dateOfBirth: '1990-01-01' })).status).toBe(409);
  });

  it.each([
    ['firstName', { firstName: '' }],
    ['firstName', { firstName: 'x'.repeat(101) }],
    ['lastName', { lastName: undefined }],
    ['lastName', { lastName: '   ' }],
    ['email', { email: 'not-an-email' }],
    ['email', { email: `${'a'.repeat(250)}@example.com` }],
    ['phone', { phone: '1'.repeat(51) }],
    ['phone', { phone: '   ' }],
    ['phone', { email: null, phone: ' \t ' }],
    ['phone', { phone: '+61 400\n000 000' }],
    ['expiresInDays', { expiresInDays: 0 }],
    ['expiresInDays', { expiresInDays: 91 }],
    ['merchantId', { merchantId: 'nope' }],
  ])('refuses an invalid %s with 400 naming it', async (field, extra) => {
    const res = await api.post('/api/Invitations', body(extra), { token: m.key });
    expect(res.status).toBe(400);
    expect(res.body.errors[field], JSON.stringify(res.body)).toBeDefined();
  });

  it('keeps a phone of up to 50 characters as sent, whatever its format, and takes an empty one as none', async () => {
    for (const phone of ['x'.repeat(50), '(-) ', 'ext. 12']) {
      const res = await api.post('/api/Invitations', body({ phone }), { token: m.key });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.phone).toBe(phone);
      expect((await api.get(`/api/Invitations/${res.body.invitationId}`, { token: m.key })).body.phone).toBe(phone);
    }
    const none = await api.post('/api/Invitations', body({ phone: '' }), { token: m.key });
    expect(none.status, JSON.stringify(none.body)).toBe(200);
    expect(none.body.phone).toBeNull();
    const neither = await api.post('/api/Invitations', body({ email: null, phone: '' }), { token: m.key });
    expect(neither.status).toBe(400);
    expect(Object.keys(neither.body.errors).sort()).toEqual(['email', 'phone']);
  });

  it('refuses an invitation with neither email nor phone (400)', async () => {
    const res = await api.post('/api/Invitations', body({ email: null, phone: null }), { token: m.key });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['email', 'phone']);
  });

  it('refuses names with line breaks or control characters, which would lay out text of the merchant\'s own in the platform\'s email (probe H)', async () => {
    for (const [field, value] of [
      ['firstName', 'Bob,\n\nSECURITY ALERT: your bank account was locked. Unlock:\nhttps://evil.example/u'],
      ['lastName', '\r\nBcc: x@evil.example'],
      ['firstName', 'Tab\tbed'],
      ['lastName', 'Line\u2028separated'],
    ] as const) {
      const res = await api.post('/api/Invitations', body({ [field]: value }), { token: m.key });
      expect(res.status, `${field} ${JSON.stringify(value)}`).toBe(400);
      expect(Object.keys(res.body.errors)).toEqual([field]);
    }
    expect((await api.post('/api/Invitations', body({ firstName: 'Zoë', lastName: "O'Brien-Łukasz" }), { token: m.key })).status).toBe(200);
  });

  it('answers MerchantNotFound 404 with the outcome for a merchant that does not exist', async () => {
    const res = await api.post('/api/Invitations', body({ merchantId: '00000000-0000-4000-8000-000000000001' }), { token: admin });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.outcome).toBe('MerchantNotFound');
  });

  it('answers NoDeliveryChannel 422 with the outcome for only a phone when no SMS channel is configured', async () => {
    const res = await api.post('/api/Invitations', body({ email: null, phone: '+61 400 000 002' }), { token: m.key });
    expect(res.status).toBe(422);
    expect(res.body.outcome).toBe('NoDeliveryChannel');
  });

  it('needs Admin or above: Staff is 403, a customer token 401, another merchant 403', async () => {
    const staff = await createMerchantUser(api, admin, m.id, 'Staff');
    expect((await api.post('/api/Invitations', body(), { token: staff.token })).status).toBe(403);
    const admin2 = await createMerchantUser(api, admin, m.id, 'Admin');
    expect((await api.post('/api/Invitations', body(), { token: admin2.token })).status).toBe(200);
    const customer = await signUpCustomer(api);
    expect((await api.post('/api/Invitations', body(), { token: customer.token })).status).toBe(401);
    const other = await setUpMerchant(api, admin);
    expect((await api.post('/api/Invitations', body(), { token: other.key })).status).toBe(403);
  });
});

describe('GET, list and DELETE /api/Invitations', () => {
  it('lists a merchant\'s invitations paged, filters by status, and reads one (Viewer)', async () => {
    const own = await setUpMerchant(api, admin);
    const a = await invite(api, own);
    const b = await invite(api, own);
    const viewer = await createMerchantUser(api, admin, own.id, 'Viewer');
    const page = await api.get(`/api/Invitations?merchantId=${own.id}&pageSize=1`, { token: viewer.token });
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ page: 1, pageSize: 1, totalCount: 2, totalPages: 2, hasNextPage: true, hasPreviousPage: false });
    expect(page.body.items[0].id).toBe(b.invitationId);

    expect((await api.del(`/api/Invitations/${a.invitationId}`, { token: own.key })).status).toBe(204);
    const revoked = await api.get(`/api/Invitations?merchantId=${own.id}&status=Revoked`, { token: viewer.token });
    expect(revoked.body.items.map((i: any) => i.id)).toEqual([a.invitationId]);
    const pending = await api.get(`/api/Invitations?merchantId=${own.id}&status=Pending`, { token: viewer.token });
    expect(pending.body.items.map((i: any) => i.id)).toEqual([b.invitationId]);
    expect((await api.get(`/api/Invitations?merchantId=${own.id}&status=Nope`, { token: viewer.token })).status).toBe(400);

    const one = await api.get(`/api/Invitations/${b.invitationId}`, { token: viewer.token });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: b.invitationId, merchantId: own.id, firstName: 'Ada', lastName: 'Lovelace', email: b.email, phone: null, status: 'Pending', acceptedAt: null, revokedAt: null });
    expect((await api.del(`/api/Invitations/${b.invitationId}`, { token: viewer.token })).status).toBe(403);
  });

  // Regression: the reference tells a client whose create timed out to list the merchant's
  // invitations by email to tell whether one was made, but the list had no email filter: the
  // parameter was ignored and every invitation came back.
  it('filters the list by the whole email, in any letter case', async () => {
    const email = `${unique('Find')}@Example.com`;
    const other = `${unique('other')}@example.com`;
    const made = await api.post('/api/Invitations', body({ email }), { token: m.key });
    expect(made.status).toBe(200);
    expect((await api.post('/api/Invitations', body({ email: other }), { token: m.key })).status).toBe(200);
    const found = await api.get(`/api/Invitations?email=${encodeURIComponent(email.toLowerCase())}`, { token: m.key });
    expect(found.status).toBe(200);
    expect([found.body.totalCount, found.body.items.map((i: any) => i.id)]).toEqual([1, [made.body.invitationId]]);
    const none = await api.get(`/api/Invitations?email=${encodeURIComponent(email.slice(1))}&status=Pending`, { token: m.key });
    expect(none.body.totalCount).toBe(0);
    const both = await api.get(`/api/Invitations?email=${encodeURIComponent(email.toUpperCase())}&status=Pending`, { token: m.key });
    expect(both.body.items.map((i: any) => i.id)).toEqual([made.body.invitationId]);
  });

  it("hides another merchant's invitation (404) and refuses listing it (403)", async () => {
    const { invitationId } = await invite(api, m);
    const other = await setUpMerchant(api, admin);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: other.key })).status).toBe(404);
    expect((await api.del(`/api/Invitations/${invitationId}`, { token: other.key })).status).toBe(404);
    expect((await api.get(`/api/Invitations?merchantId=${m.id}`, { token: other.key })).status).toBe(403);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: admin })).status).toBe(200);
  });

  it('revoking is idempotent and makes the link answer 410', async () => {
    const { invitationId, token } = await invite(api, m);
    expect((await api.del(`/api/Invitations/${invitationId}`, { token: m.key })).status).toBe(204);
    expect((await api.del(`/api/Invitations/${invitationId}`, { token: m.key })).status).toBe(204);
    expect((await api.get(`/api/Invitations/${invitationId}`, { token: m.key })).body.status).toBe('Revoked');
    expect((await api.post('/api/onboard/preview', { token })).status).toBe(410);
    const customer = await signUpCustomer(api);
    expect((await api.post('/api/onboard/accept', { token }, { token: customer.token })).status).toBe(410);
  });

  it('revoking an accepted invitation closes its wizard: steps and completion 410, the read shows Revoked', async () => {
    const inv = await invite(api, m);
    const customer = await signUpCustomer(api, inv.email);
    expect((await api.post('/api/onboard/accept', { token: inv.token }, { token: customer.token })).status).toBe(200);
    expect((await api.del(`/api/Invitations/${inv.invitationId}`, { token: m.key })).status).toBe(204);
    const details = await api.patch('/api/onboard/details', { invitationId: inv.invitationId, firstName: 'Ada', lastName: 'Lovelace' }, { token: customer.token });
    expect(details.status, JSON.stringify(details.body)).toBe(410);
    expect((await api.post('/api/onboard/complete', { invitationId: inv.invitationId }, { token: customer.token })).status).toBe(410);
    const wizard = await api.get(`/api/onboard/${inv.invitationId}`, { token: customer.token });
    expect(wizard.status).toBe(200);
    expect(wizard.body.status).toBe('Revoked');
  });
});
