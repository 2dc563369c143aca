import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { captureBank, complete, GOOD_BANK, linkPayload, openSession, setUpCheckoutMerchant, signLink, type CheckoutMerchant } from '../support/checkout-fixtures.js';
import { eventsAgainstPublishedSchemas } from '../support/published-events.js';
import { adminToken } from '../support/e2e.js';
import { apiClient, createMerchantUser, eventually, unique } from '../support/fixtures.js';
import { webhookFixtures } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/** Hosted checkout through the gateway: links, resolve outcomes, session endpoints, completion. */
const api = apiClient(inject('gatewayUrl'));
const admin = adminToken();
const sandboxUrl = inject('sandboxProviderUrl');
const sandbox = (method: string, path: string, body?: unknown) =>
  fetch(sandboxUrl + path, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
let m: CheckoutMerchant;
let db: pg.Client;
let receiver: WebhookReceiver;

beforeAll(async () => {
  m = await setUpCheckoutMerchant(api, admin);
  db = new pg.Client({ connectionString: inject('databaseUrl') });
  await db.connect();
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await sandbox('DELETE', '/__sandbox/faults');
  await db?.end();
  await receiver?.close();
});

describe('POST /api/Checkout/links', () => {
  it('signs a link with the calling API key: 201, Location = url, and the link resolves', async () => {
    const res = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/done', customer: { email: 'pre@example.com', firstName: 'Pre' } }, { token: m.key });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.headers.get('location')).toBe(res.body.url);
    expect(res.body.url).toMatch(/\/checkout\?d=[A-Za-z0-9_-]+&s=[A-Za-z0-9_-]+$/);
    const payload = JSON.parse(Buffer.from(res.body.d, 'base64url').toString('utf8'));
    expect(payload).toMatchObject({ v: 1, kid: m.keyId, mid: m.id, pid: m.planId, returnUrl: 'https://shop.example/done', customer: { email: 'pre@example.com', firstName: 'Pre' } });
    expect(Math.abs(payload.exp * 1000 - Date.parse(res.body.expiresAt))).toBe(0);
    expect(Date.parse(res.body.expiresAt) - Date.now()).toBeGreaterThan(55 * 60_000);
    // Signed exactly as a merchant would sign it themselves.
    expect(signLink(m.signingSecret, payload)).toEqual({ d: res.body.d, s: res.body.s });
    const resolved = await api.post('/api/Checkout/sessions/resolve', { d: res.body.d, s: res.body.s });
    expect(resolved.status).toBe(200);
    const me = await api.get('/api/Checkout/sessions/me', { token: resolved.body.sessionToken });
    expect(me.body.customer).toEqual({ email: 'pre@example.com', firstName: 'Pre', lastName: null, phone: null });
  });

  it('a merchant user names the key (apiKeyId); without it 400; another merchant 403; unknown plan 404; inactive plan 422; bad returnUrl 400', async () => {
    const { token } = await createMerchantUser(api, admin, m.id, 'Admin');
    const withKey = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x', apiKeyId: m.keyId, expiresInMinutes: 5 }, { token });
    expect(withKey.status, JSON.stringify(withKey.body)).toBe(201);
    expect(Date.parse(withKey.body.expiresAt) - Date.now()).toBeLessThanOrEqual(5 * 60_000);
    const without = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x' }, { token });
    expect(without.status).toBe(400);
    expect(without.body.errors.apiKeyId).toBeDefined();
    const other = await setUpCheckoutMerchant(api, admin);
    const foreignKey = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x', apiKeyId: other.keyId }, { token });
    expect(foreignKey.status).toBe(400);
    expect((await api.post('/api/Checkout/links', { merchantId: other.id, planId: other.planId, returnUrl: 'https://shop.example/x' }, { token: m.key })).status).toBe(403);
    expect((await api.post('/api/Checkout/links', { merchantId: m.id, planId: randomUUID(), returnUrl: 'https://shop.example/x' }, { token: m.key })).status).toBe(404);
    const inactive = await api.post('/api/Plans', { merchantId: m.id, productId: m.productId, name: 'Old', amount: 5, interval: 'Month', isActive: false }, { token: m.key });
    expect((await api.post('/api/Checkout/links', { merchantId: m.id, planId: inactive.body.id, returnUrl: 'https://shop.example/x' }, { token: m.key })).status).toBe(422);
    // Whitespace or a control character anywhere (it was trimmed and signed as sent, the session then
    // keeping the trimmed URL): refused, since the URL is kept exactly as sent and no URI holds them.
    for (const returnUrl of ['http://shop.example/x', 'javascript:alert(1)', 'not a url', ' https://shop.example/x', 'https://shop.example/x ', 'https://shop.example/a b', 'https://shop.example/x\n']) {
      const bad = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl }, { token: m.key });
      expect(bad.status, returnUrl).toBe(400);
      expect(bad.body.errors.returnUrl).toBeDefined();
    }
  });

  it('refuses a customer token or no credential (401) and a Viewer (403)', async () => {
    expect((await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x' })).status).toBe(401);
    const { token } = await createMerchantUser(api, admin, m.id, 'Viewer');
    expect((await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x', apiKeyId: m.keyId }, { token })).status).toBe(403);
  });
});

describe('POST /api/Checkout/sessions/resolve', () => {
  const resolve = (link: { d: string; s: string }) => api.post('/api/Checkout/sessions/resolve', link);
  const expectOutcome = async (link: { d: string; s: string }, status: number, outcome: string) => {
    const res = await resolve(link);
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body).toMatchObject({ status, outcome });
  };

  it('Ok: a session and a 30-minute checkout JWT with sid, mid and scope "checkout"; a replay gives the same session and a fresh token', async () => {
    const link = signLink(m.signingSecret, linkPayload(m));
    const first = await resolve(link);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ outcome: 'Ok', sessionId: expect.any(String), sessionToken: expect.any(String) });
    const claims = JSON.parse(Buffer.from(first.body.sessionToken.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({ sid: first.body.sessionId, mid: m.id, scope: 'checkout' });
    expect(claims.exp - claims.iat).toBe(1800);
    expect(Math.abs(Date.parse(first.body.expiresAt) - claims.exp * 1000)).toBeLessThan(1000);
    await new Promise((r) => setTimeout(r, 1100));
    const replay = await resolve(link);
    expect(replay.status).toBe(200);
    expect(replay.body.sessionId).toBe(first.body.sessionId);
    expect(replay.body.sessionToken).not.toBe(first.body.sessionToken);
  });

  it('a replay after the link expired answers Ok with the same session while a session token lives from its opening; then, or for a link that opened none, LinkExpired', async () => {
    const payload = linkPayload(m, { exp: Math.floor(Date.now() / 1000) + 2 });
    const link = signLink(m.signingSecret, payload);
    const first = await resolve(link);
    expect(first.status).toBe(200);
    await new Promise((r) => setTimeout(r, Math.max(0, (payload.exp as number) * 1000 - Date.now() + 100)));
    const replay = await resolve(link);
    expect(replay.status, JSON.stringify(replay.body)).toBe(200);
    expect(replay.body).toMatchObject({ outcome: 'Ok', sessionId: first.body.sessionId });
    expect((await api.get('/api/Checkout/sessions/me', { token: replay.body.sessionToken })).body.status).toBe('Open');
    // Another d with the same nonce, expired: LinkExpired (expiry is checked before the nonce).
    await expectOutcome(signLink(m.signingSecret, { ...payload, returnUrl: 'https://shop.example/other' }), 410, 'LinkExpired');
    // Once a session token from its opening would have expired, the link is expired for good.
    await db.query(`update checkout.sessions set created_at = now() - interval '30 minutes' where id = $1`, [first.body.sessionId]);
    await expectOutcome(link, 410, 'LinkExpired');
  });

  it('each refusal in the order of contract §6, as a problem with its outcome', async () => {
    const good = linkPayload(m);
    // d undecodable → InvalidSignature 401 (even with an unknown key inside).
    await expectOutcome({ d: 'not-json', s: 'x' }, 401, 'InvalidSignature');
    await expectOutcome({ d: Buffer.from('{"v":2}').toString('base64url'), s: 'x' }, 401, 'InvalidSignature');
    // A validly signed d holding text no field can store (a NUL, an unpaired surrogate) is not the
    // payload either: InvalidSignature, never a bare 400 nor a U+FFFD stored in its place.
    await expectOutcome(signLink(m.signingSecret, { ...good, nonce: `${randomUUID()}\u0000` }), 401, 'InvalidSignature');
    await expectOutcome(signLink(m.signingSecret, { ...good, nonce: randomUUID(), customer: { email: 'a@example.com', firstName: 'a\ud800b', lastName: 'B' } }), 401, 'InvalidSignature');
    // A customer.email that is not an email address is not the payload either (it resolved Ok).
    await expectOutcome(signLink(m.signingSecret, { ...good, nonce: randomUUID(), customer: { email: 'nope', firstName: 'A', lastName: 'B' } }), 401, 'InvalidSignature');
    // Nor is a returnUrl with whitespace (it resolved Ok, the session keeping it trimmed).
    await expectOutcome(signLink(m.signingSecret, { ...good, nonce: randomUUID(), returnUrl: ' https://shop.example/done' }), 401, 'InvalidSignature');
    // Unknown key → ApiKeyNotFound, checked before the signature.
    await expectOutcome({ ...signLink(m.signingSecret, { ...good, kid: randomUUID() }) }, 401, 'ApiKeyNotFound');
    // Wrong signature → InvalidSignature.
    const signed = signLink(m.signingSecret, good);
    await expectOutcome({ d: signed.d, s: signLink(m.signingSecret, { ...good, nonce: 'other-nonce-1' }).s }, 401, 'InvalidSignature');
    // A valid signature naming another merchant → MerchantMismatch (before expiry).
    const other = await setUpCheckoutMerchant(api, admin);
    await expectOutcome(signLink(m.signingSecret, { ...good, mid: other.id, exp: 1000 }), 401, 'MerchantMismatch');
    // Expired → LinkExpired 410 (before the nonce and the plan).
    await expectOutcome(signLink(m.signingSecret, { ...good, exp: Math.floor(Date.now() / 1000) - 1, pid: randomUUID() }), 410, 'LinkExpired');
    // Plan unknown, another merchant's, or inactive → PlanNotFound 404.
    await expectOutcome(signLink(m.signingSecret, { ...good, nonce: randomUUID(), pid: randomUUID() }), 404, 'PlanNotFound');
    await expectOutcome(signLink(m.signingSecret, { ...good, nonce: randomUUID(), pid: other.planId }), 404, 'PlanNotFound');
    // Nonce used by a different d → NonceAlreadyUsed 409, checked before the plan.
    expect((await resolve(signed)).status).toBe(200);
    await expectOutcome(signLink(m.signingSecret, { ...good, returnUrl: 'https://shop.example/other', pid: randomUUID() }), 409, 'NonceAlreadyUsed');
  });

  it('a revoked or expired key → ApiKeyNotFound', async () => {
    const revoked = await setUpCheckoutMerchant(api, admin);
    const link = signLink(revoked.signingSecret, linkPayload(revoked));
    expect((await api.del(`/api/ApiKeys/${revoked.keyId}`, { token: admin })).status).toBe(204);
    await expectOutcome(link, 401, 'ApiKeyNotFound');
  });

  it('validates d and s (400) and needs no credential', async () => {
    const res = await api.post('/api/Checkout/sessions/resolve', { d: '' });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['d', 's']);
  });
});

describe('the checkout-session token', () => {
  it('is accepted only on /api/Checkout/sessions/me*; other credentials are 401 there', async () => {
    const s = await openSession(api, m);
    expect((await api.get(`/api/Products?merchantId=${m.id}`, { token: s.token })).status).toBe(401);
    expect((await api.get(`/api/Members?merchantId=${m.id}`, { token: s.token })).status).toBe(401);
    expect((await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x' }, { token: s.token })).status).toBe(401);
    expect((await api.get('/api/Checkout/sessions/me', { token: m.key })).status).toBe(401);
    expect((await api.get('/api/Checkout/sessions/me', { token: admin })).status).toBe(401);
    expect((await api.get('/api/Checkout/sessions/me')).status).toBe(401);
    expect((await api.get('/api/Checkout/sessions/me', { token: s.token })).status).toBe(200);
  });
});

describe('session endpoints', () => {
  it('GET me: merchant name, plan (decimal amount), customer from the link, Open, returnUrl', async () => {
    const s = await openSession(api, m, { customer: { email: 'me@example.com', firstName: 'Ada', lastName: 'Lovelace', phone: '0400 000 000' } });
    const me = await api.get('/api/Checkout/sessions/me', { token: s.token });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({
      sessionId: s.sessionId,
      merchantName: expect.stringMatching(/^Merchant /),
      plan: { name: 'Monthly', amount: 19.95, currency: 'AUD', interval: 'Month', intervalCount: 1 },
      customer: { email: 'me@example.com', firstName: 'Ada', lastName: 'Lovelace', phone: '0400 000 000' },
      status: 'Open',
      returnUrl: 'https://shop.example/thanks',
    });
  });

  it('PATCH me/customer: 204 and read back; 400 naming invalid fields', async () => {
    const s = await openSession(api, m);
    const ok = await api.patch('/api/Checkout/sessions/me/customer', { email: 'new@example.com', firstName: 'New', lastName: 'Name', phone: null }, { token: s.token });
    expect(ok.status).toBe(204);
    expect((await api.get('/api/Checkout/sessions/me', { token: s.token })).body.customer).toEqual({ email: 'new@example.com', firstName: 'New', lastName: 'Name', phone: null });
    // phone: absent keeps the session's (the link's), null clears it, a string is stored as sent.
    const withPhone = await openSession(api, m, { customer: { email: 'signed@example.com', firstName: 'Pat', lastName: 'P', phone: '+61400000009' } });
    const me = async () => (await api.get('/api/Checkout/sessions/me', { token: withPhone.token })).body.customer;
    expect((await api.patch('/api/Checkout/sessions/me/customer', { email: 'signed@example.com', firstName: 'Pat', lastName: 'Peterson' }, { token: withPhone.token })).status).toBe(204);
    expect(await me()).toEqual({ email: 'signed@example.com', firstName: 'Pat', lastName: 'Peterson', phone: '+61400000009' });
    await api.patch('/api/Checkout/sessions/me/customer', { email: 'signed@example.com', firstName: 'Pat', lastName: 'P', phone: '' }, { token: withPhone.token });
    expect((await me()).phone).toBe('');
    await api.patch('/api/Checkout/sessions/me/customer', { email: 'signed@example.com', firstName: 'Pat', lastName: 'P', phone: null }, { token: withPhone.token });
    expect((await me()).phone).toBeNull();
    const bad = await api.patch('/api/Checkout/sessions/me/customer', { email: 'nope', firstName: ' ', lastName: '' }, { token: s.token });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.errors).sort()).toEqual(['email', 'firstName', 'lastName']);
  });

  it('capture-bank: a btok_ token; only token, BSB, account name and last 4 stored; the account number never echoed or stored', async () => {
    const s = await openSession(api, m);
    const token = await captureBank(api, s, { accountName: 'Grace Hopper', bsb: '062000', accountNumber: '987654321' });
    expect(token).toMatch(/^btok_/);
    const { rows } = await db.query('select * from checkout.bank_tokens where token = $1', [token]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ session_id: s.sessionId, bsb: '062-000', account_name: 'Grace Hopper', last4: '4321' });
    const dump = JSON.stringify((await db.query(`select * from checkout.bank_tokens, checkout.sessions where sessions.id = bank_tokens.session_id and sessions.id = $1`, [s.sessionId])).rows);
    expect(dump).not.toContain('987654321');
    const bad = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: s.sessionId, accountName: '', bsb: '06-2000', accountNumber: '1234' }, { token: s.token });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.errors).sort()).toEqual(['accountName', 'accountNumber', 'bsb']);
    expect(JSON.stringify(bad.body)).not.toContain('1234"');
    for (const body of [{ bsb: '06200' }, { bsb: '062-0000' }, { accountNumber: '1234567890' }, { accountNumber: '12a45' }, { bsb: '0620-00' }]) {
      const r = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: s.sessionId, ...GOOD_BANK, ...body }, { token: s.token });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('capture-bank: sessionId is optional (the session token names the session); absent or null tokenises for the token\'s session', async () => {
    const s = await openSession(api, m);
    const absent = await api.post('/api/Checkout/sessions/me/capture-bank', { ...GOOD_BANK }, { token: s.token });
    expect(absent.status, JSON.stringify(absent.body)).toBe(200);
    expect(absent.body.providerToken).toMatch(/^btok_/);
    const nulled = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: null, ...GOOD_BANK }, { token: s.token });
    expect(nulled.status, JSON.stringify(nulled.body)).toBe(200);
    const { rows } = await db.query('select session_id from checkout.bank_tokens where token = $1', [absent.body.providerToken]);
    expect(rows).toEqual([{ session_id: s.sessionId }]);
    // The token completes the session it was captured for.
    const done = await complete(api, s, absent.body.providerToken);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body.status).toBe('Completed');
  });

  it('capture-bank: accountName is 1 to 200 characters, counted as characters (not UTF-16 units), and kept exactly as sent on the member\'s payment method', async () => {
    const s = await openSession(api, m);
    const at = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: s.sessionId, ...GOOD_BANK, accountName: '😀'.repeat(200) }, { token: s.token });
    expect(at.status, JSON.stringify(at.body)).toBe(200);
    const past = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: s.sessionId, ...GOOD_BANK, accountName: '😀'.repeat(201) }, { token: s.token });
    expect(past.status).toBe(400);
    expect(past.body.errors.accountName).toBeDefined();
    const name = '  Grace  Hopper 😀 ';
    const done = await complete(api, s, await captureBank(api, s, { ...GOOD_BANK, accountName: name }));
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const email = (s.payload.customer as { email: string }).email;
    const members = await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(email)}`, { token: m.key });
    const methods = await api.get(`/api/members/${members.body.items[0].id}/payment-methods`, { token: m.key });
    expect(methods.body[0].accountName).toBe(name);
  });

  it('capture-bank: 404 for another sessionId; 502 while the provider is down', async () => {
    const s = await openSession(api, m);
    const other = await openSession(api, m);
    expect((await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: other.sessionId, ...GOOD_BANK }, { token: s.token })).status).toBe(404);
    await sandbox('POST', '/__sandbox/faults', { down: true, account: m.id });
    try {
      const down = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: s.sessionId, ...GOOD_BANK }, { token: s.token });
      expect(down.status).toBe(502);
    } finally {
      await sandbox('DELETE', `/__sandbox/faults?account=${m.id}`);
    }
  });
});

describe('POST /api/Checkout/sessions/me/complete', () => {
  it('provisions account, member, payment method and subscription; fires one verified checkout.completed; a repeat answers the same and creates nothing', async () => {
    const merchant = await setUpCheckoutMerchant(api, admin);
    const put = await api.put(`/api/ApiKeys/${merchant.keyId}/webhook`, { id: merchant.keyId, merchantId: merchant.id, webhookUrl: receiver.url('/checkout-happy'), webhookEvents: ['checkout.completed'], webhookEnabled: true }, { token: merchant.key });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    receiver.secret('/checkout-happy', merchant.signingSecret);
    const fx = webhookFixtures(api, receiver, admin);
    await fx.settle(merchant.id, await fx.createKey(merchant.id));
    const email = `${unique('buyer')}@example.com`;
    const s = await openSession(api, merchant, { customer: { email, firstName: 'Grace', lastName: 'Hopper' }, returnUrl: 'https://shop.example/welcome' });
    const token = await captureBank(api, s);
    const done = await complete(api, s, token);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.headers.get('content-type')).toContain('application/json');
    expect(done.body).toEqual({ status: 'Completed', returnUrl: 'https://shop.example/welcome', failureReason: null });
    const again = await complete(api, s, token);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(done.body);

    const members = await api.get(`/api/Members?merchantId=${merchant.id}&email=${encodeURIComponent(email)}`, { token: merchant.key });
    expect(members.body.items).toHaveLength(1);
    const memberId = members.body.items[0].id;
    const subs = await api.get(`/api/Subscriptions?merchantId=${merchant.id}&memberId=${memberId}`, { token: merchant.key });
    expect(subs.body.items).toHaveLength(1);
    expect(subs.body.items[0]).toMatchObject({ planId: merchant.planId, status: 'Active' });
    const methods = await api.get(`/api/members/${memberId}/payment-methods`, { token: merchant.key });
    expect(methods.body).toHaveLength(1);
    expect(methods.body[0]).toMatchObject({ type: 'BankAccount', last4: '5678', bsb: '062-000', accountName: 'Grace Hopper' });
    expect(subs.body.items[0].paymentMethodId).toBe(methods.body[0].id);

    const [hook] = await receiver.waitFor('/checkout-happy', (r) => r.length >= 1);
    expect(hook!.verified).toBe(true);
    expect(hook!.payload).toMatchObject({
      type: 'checkout.completed',
      merchantId: merchant.id,
      data: { sessionId: s.sessionId, memberId, paymentMethodId: methods.body[0].id, subscriptionId: subs.body.items[0].id, planId: merchant.planId, email },
    });
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.received('/checkout-happy').filter((r) => r.payload?.type === 'checkout.completed')).toHaveLength(1);
    const events = await db.query(`select count(*)::int as n from checkout.outbox where type = 'checkout.completed' and data->>'sessionId' = $1`, [s.sessionId]);
    expect(events.rows[0].n).toBe(1);

    // The customer account is unclaimed: signing up with the email claims it (200, not 409).
    const signup = await api.post('/api/account/signup', { email, password: 'correct-horse-battery', firstName: 'Grace', lastName: 'Hopper', dateOfBirth: '1990-01-01', acceptedTerms: true });
    expect(signup.status, JSON.stringify(signup.body)).toBe(200);

    // A completed session refuses further changes.
    expect((await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId: s.sessionId, ...GOOD_BANK }, { token: s.token })).status).toBe(409);
    expect((await api.patch('/api/Checkout/sessions/me/customer', { email, firstName: 'G', lastName: 'H' }, { token: s.token })).status).toBe(409);
    expect((await api.get('/api/Checkout/sessions/me', { token: s.token })).body.status).toBe('Completed');
  });

  it('reuses the existing member of the email', async () => {
    const email = `${unique('known')}@example.com`;
    const member = await api.post('/api/Members', { merchantId: m.id, email, firstName: 'Known', lastName: 'Member' }, { token: m.key });
    expect(member.status).toBe(201);
    const s = await openSession(api, m, { customer: { email: email.toUpperCase(), firstName: 'Known', lastName: 'Member' } });
    expect((await complete(api, s, await captureBank(api, s))).status).toBe(200);
    const subs = await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${member.body.id}`, { token: m.key });
    expect(subs.body.items).toHaveLength(1);
  });

  it('Failed 400 for an unknown token, another session\'s token and another merchant\'s token', async () => {
    const s = await openSession(api, m);
    const unknown = await complete(api, s, 'btok_doesnotexist');
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ status: 'Failed', failureReason: expect.any(String) });
    const other = await openSession(api, m);
    const otherToken = await captureBank(api, other);
    expect((await complete(api, s, otherToken)).status).toBe(400);
    const foreign = await setUpCheckoutMerchant(api, admin);
    const fs = await openSession(api, foreign);
    expect((await complete(api, s, await captureBank(api, fs))).body.status).toBe('Failed');
  });

  it('Failed 409 when the member already has a live subscription to the plan', async () => {
    const email = `${unique('dup')}@example.com`;
    const first = await openSession(api, m, { customer: { email, firstName: 'Dup', lastName: 'Licate' } });
    expect((await complete(api, first, await captureBank(api, first))).status).toBe(200);
    const second = await openSession(api, m, { customer: { email, firstName: 'Dup', lastName: 'Licate' } });
    const res = await complete(api, second, await captureBank(api, second));
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ status: 'Failed', failureReason: expect.stringContaining('live subscription') });
    // A failed completion changes nothing: the member keeps the one payment method of the first.
    const member = (await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(email)}`, { token: m.key })).body.items[0];
    const methods = await api.get(`/api/members/${member.id}/payment-methods`, { token: m.key });
    expect(methods.body).toHaveLength(1);
    // Nor does one for a plan deactivated since the session opened: no member, no method.
    const planned = await setUpCheckoutMerchant(api, admin);
    const newcomer = `${unique('late')}@example.com`;
    const late = await openSession(api, planned, { customer: { email: newcomer, firstName: 'Late', lastName: 'Comer' } });
    const lateToken = await captureBank(api, late);
    expect((await api.patch(`/api/Plans/${planned.planId}`, { isActive: false }, { token: planned.key })).status).toBe(200);
    expect((await complete(api, late, lateToken)).status).toBe(409);
    expect((await api.get(`/api/Members?merchantId=${planned.id}&email=${encodeURIComponent(newcomer)}`, { token: planned.key })).body.items).toEqual([]);
  });

  it('concurrent completions for one email and plan: one Completed, the rest 409 Failed having added nothing (one payment method, one payment_method.added)', async () => {
    // Regression: every completion passed billing's "already subscribed" check before any had
    // subscribed, so each added its payment method (and event) before all but one were refused.
    const email = `${unique('race')}@example.com`;
    const sessions = await Promise.all(
      [1, 2, 3, 4, 5].map(async () => {
        const s = await openSession(api, m, { customer: { email, firstName: 'Race', lastName: 'Condition' } });
        return { s, token: await captureBank(api, s) };
      }),
    );
    const results = await Promise.all(sessions.map(({ s, token }) => complete(api, s, token)));
    expect(results.map((r) => r.status).sort(), JSON.stringify(results.map((r) => r.body))).toEqual([200, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.status === 409)) {
      expect(r.body).toMatchObject({ status: 'Failed', failureReason: 'The customer already has a live subscription to this plan.' });
    }
    const members = (await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(email)}`, { token: m.key })).body.items;
    expect(members).toHaveLength(1);
    const memberId = members[0].id;
    expect((await api.get(`/api/members/${memberId}/payment-methods`, { token: m.key })).body).toHaveLength(1);
    expect((await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${memberId}`, { token: m.key })).body.totalCount).toBe(1);
    const added = await db.query(`select count(*)::int as n from billing.outbox where type = 'payment_method.added' and data->>'memberId' = $1`, [memberId]);
    expect(added.rows[0].n).toBe(1);
    const completedEvents = await db.query(`select count(*)::int as n from checkout.outbox where type = 'checkout.completed' and data->>'email' = $1`, [email]);
    expect(completedEvents.rows[0].n).toBe(1);
  });

  it('Failed 400 naming missing customer details or for an empty token, 409 for a plan deactivated since; 400 for another sessionId; 400 without a providerToken', async () => {
    const s = await openSession(api, m, { customer: undefined });
    const token = await captureBank(api, s);
    const missing = await complete(api, s, token);
    expect(missing.status).toBe(400);
    // interface.md: complete's 400 answers a completion result, not problem details.
    expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
    expect(missing.body).toMatchObject({ status: 'Failed', returnUrl: expect.any(String), failureReason: expect.stringContaining('email, firstName, lastName') });
    const empty = await complete(api, s, '');
    expect([empty.status, empty.body.status]).toEqual([400, 'Failed']);

    const planned = await setUpCheckoutMerchant(api, admin);
    const late = await openSession(api, planned);
    const lateToken = await captureBank(api, late);
    expect((await api.patch(`/api/Plans/${planned.planId}`, { isActive: false }, { token: planned.key })).status).toBe(200);
    const inactive = await complete(api, late, lateToken);
    expect(inactive.status).toBe(409);
    expect(inactive.body).toMatchObject({ status: 'Failed', failureReason: 'The plan is no longer active.' });

    const other = await openSession(api, m);
    // Another session's id: a Failed completion result, 400 (the endpoint answers 200, 400 and 409), with this session's returnUrl.
    const foreign = await api.post('/api/Checkout/sessions/me/complete', { sessionId: other.sessionId, providerToken: token }, { token: s.token });
    expect(foreign.status).toBe(400);
    expect(foreign.body).toMatchObject({ status: 'Failed', returnUrl: s.payload.returnUrl, failureReason: 'sessionId is not the session of this checkout token.' });
    // A body that fails its schema is a Failed completion result as well (it was problem details).
    const noToken = await api.post('/api/Checkout/sessions/me/complete', { sessionId: s.sessionId }, { token: s.token });
    expect(noToken.status).toBe(400);
    expect(noToken.headers.get('content-type')).toMatch(/^application\/json/);
    // Every completion result names the session's returnUrl (interface.md: its fields are strings), this one too.
    expect(noToken.body).toMatchObject({ status: 'Failed', returnUrl: s.payload.returnUrl, failureReason: expect.stringContaining('providerToken'), errors: { providerToken: [expect.any(String)] } });
    const wrongType = await api.post('/api/Checkout/sessions/me/complete', { sessionId: s.sessionId, providerToken: 42 }, { token: s.token });
    expect([wrongType.status, wrongType.body.status]).toEqual([400, 'Failed']);
    // A token over the length limit is told so (it was "Must be a string." for a string).
    const tooLong = await api.post('/api/Checkout/sessions/me/complete', { sessionId: s.sessionId, providerToken: `btok_${'a'.repeat(124)}` }, { token: s.token });
    expect([tooLong.status, tooLong.body.status]).toEqual([400, 'Failed']);
    expect(tooLong.body.errors).toEqual({ providerToken: ['Must be at most 128 characters.'] });
    // A body refused before the route runs (not JSON, a NUL character) is a Failed completion result as well, not problem details.
    const notJson = await api.request('POST', '/api/Checkout/sessions/me/complete', { token: s.token, raw: '{"sessionId":', headers: { 'content-type': 'application/json' } });
    expect(notJson.status).toBe(400);
    expect(notJson.headers.get('content-type')).toMatch(/^application\/json/);
    expect(notJson.body).toMatchObject({ status: 'Failed', returnUrl: s.payload.returnUrl, failureReason: expect.stringContaining('not valid JSON'), errors: { $: [expect.any(String)] } });
    const nul = await api.post('/api/Checkout/sessions/me/complete', { sessionId: s.sessionId, providerToken: 'btok_\u0000' }, { token: s.token });
    expect(nul.status).toBe(400);
    expect(nul.headers.get('content-type')).toMatch(/^application\/json/);
    expect(nul.body).toMatchObject({ status: 'Failed', returnUrl: s.payload.returnUrl, failureReason: expect.stringContaining('providerToken'), errors: { providerToken: [expect.any(String)] } });
    // Without a usable session token there is no session to name: returnUrl null, still a completion result.
    const anonymous = await api.request('POST', '/api/Checkout/sessions/me/complete', { raw: '{', headers: { 'content-type': 'application/json' } });
    expect([anonymous.status, anonymous.body.status, anonymous.body.returnUrl]).toEqual([400, 'Failed', null]);
  });

  it('Failed 400 naming the email when the session holds one identity refuses, never problem details; links refuse such an email (400)', async () => {
    const bad = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/x', customer: { email: 'not-an-email' } }, { token: m.key });
    expect(bad.status).toBe(400);
    expect(bad.body.errors['customer.email']).toBeDefined();
    // A session opened from a link made before links checked the email.
    const s = await openSession(api, m);
    const token = await captureBank(api, s);
    await db.query(`update checkout.sessions set email = 'not-an-email' where id = $1`, [s.sessionId]);
    const res = await complete(api, s, token);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toMatchObject({ status: 'Failed', returnUrl: expect.any(String), failureReason: expect.stringContaining('email') });
  });

  it('is described in the OpenAPI document with completion results for 200, 400 and 409', async () => {
    const doc = (await api.get('/openapi.json')).body;
    const op = doc.paths['/api/Checkout/sessions/me/complete'].post;
    for (const status of ['200', '400', '409']) {
      expect(op.responses[status].content['application/json'].schema, status).toEqual({ $ref: '#/components/schemas/CheckoutCompletionResult' });
    }
  });

  it('Pending 409 while another completion of the same session is running, then Completed', async () => {
    const s = await openSession(api, m);
    const token = await captureBank(api, s);
    // A slow provider keeps the first completion in flight (its token lookup takes 1.5 s).
    await sandbox('POST', '/__sandbox/faults', { latencyMs: 1500, account: m.id });
    try {
      const first = complete(api, s, token);
      await new Promise((r) => setTimeout(r, 500));
      const second = await complete(api, s, token);
      expect(second.status).toBe(409);
      // A completion result, carrying the trace id like every error answer.
      expect(second.body).toEqual({ status: 'Pending', returnUrl: s.payload.returnUrl, failureReason: null, traceId: expect.any(String) });
      expect((await first).status).toBe(200);
    } finally {
      await sandbox('DELETE', `/__sandbox/faults?account=${m.id}`);
    }
    expect((await complete(api, s, token)).body.status).toBe('Completed');
  });

  it("refuses (409) a change of the customer's details while a completion of the session is running: the completion provisions the details it took", async () => {
    const s = await openSession(api, m);
    const token = await captureBank(api, s);
    const before = (await api.get('/api/Checkout/sessions/me', { token: s.token })).body.customer;
    await sandbox('POST', '/__sandbox/faults', { latencyMs: 1500, account: m.id });
    try {
      const first = complete(api, s, token);
      await new Promise((r) => setTimeout(r, 500));
      // It was 204, and the completed session then showed details its member and checkout.completed did not have.
      const change = await api.patch('/api/Checkout/sessions/me/customer', { email: `${unique('late')}@example.com`, firstName: 'Late', lastName: 'Change' }, { token: s.token });
      expect(change.status).toBe(409);
      expect(change.body).toMatchObject({ status: 409, traceId: expect.any(String) });
      expect((await first).status).toBe(200);
    } finally {
      await sandbox('DELETE', `/__sandbox/faults?account=${m.id}`);
    }
    const after = (await api.get('/api/Checkout/sessions/me', { token: s.token })).body;
    expect(after).toMatchObject({ status: 'Completed', customer: before });
    const members = await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(before.email)}`, { token: m.key });
    expect(members.body.items).toHaveLength(1);
  });

  it('502 while the provider is down, then completes once it is back', async () => {
    const s = await openSession(api, m);
    const token = await captureBank(api, s);
    await sandbox('POST', '/__sandbox/faults', { down: true, account: m.id });
    try {
      const down = await complete(api, s, token);
      expect(down.status).toBe(502);
    } finally {
      await sandbox('DELETE', `/__sandbox/faults?account=${m.id}`);
    }
    const res = await eventually(async () => {
      const r = await complete(api, s, token);
      return r.status === 200 ? r : undefined;
    }, 10_000, 200);
    expect(res!.body.status).toBe('Completed');
  });
});

describe('published events', () => {
  // Runs last in this file: what its checkouts published (and whatever else shares the platform).
  it('carry data their published schemas describe exactly, checkout.completed among them', async () => {
    const { mismatches, types } = await eventsAgainstPublishedSchemas(db);
    expect(mismatches).toEqual([]);
    for (const t of ['checkout.completed', 'member.created', 'payment_method.added', 'subscription.created']) expect(types).toContain(t);
  });
});
