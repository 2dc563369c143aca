import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { besideSharedPlatform } from '../support/e2e.js';
import { configureGrpcTransport, createClient, type ServiceClient } from '@billing/service-runtime';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { messagesTo, tokenFromLink, waitForMessage } from '../support/mailbox.js';
import { apiClient, createApiKey, createMerchant, unique, type ApiClient } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const dataDir = inject('dataDir');

const PROFILE_KEYS = [
  'id', 'email', 'firstName', 'lastName', 'fullName', 'dateOfBirth', 'phone', 'addressLine1', 'addressLine2',
  'city', 'state', 'postCode', 'country', 'emailVerified', 'createdAt',
].sort();
const PASSWORD = 'correct-horse-42';

function newEmail(): string {
  return `${unique('c')}@example.com`;
}

function signupBody(email: string, extra: Record<string, unknown> = {}) {
  return { email, password: PASSWORD, firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17', ...extra };
}

async function signUp(client: ApiClient = api, extra: Record<string, unknown> = {}) {
  const email = newEmail();
  const res = await client.post('/api/account/signup', signupBody(email, extra));
  if (res.status !== 200) throw new Error(`signup: ${res.status} ${JSON.stringify(res.body)}`);
  return { email, token: res.body.token as string, id: res.body.account.id as string };
}

function expectProblem(res: { status: number; headers: Headers; body: any }, status: number, typeSuffix?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body.status).toBe(status);
  if (typeSuffix) expect(res.body.type).toMatch(new RegExp(`/${typeSuffix}$`));
}

describe('POST /api/account/signup', () => {
  it('creates an account and returns a customer sign-in result', async () => {
    const email = `Mixed.${unique('Case')}@Example.com`;
    const before = Date.now();
    const res = await api.post('/api/account/signup', signupBody(email, { phone: '+61 400 000 000', city: 'Sydney', acceptedTerms: true }));
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['account', 'expiresAt', 'token']);
    expect(Object.keys(res.body.account).sort()).toEqual(['email', 'emailVerified', 'fullName', 'id']);
    // Stored and returned exactly as sent (it was lower-cased).
    expect(res.body.account).toMatchObject({ email, fullName: 'Ada Lovelace', emailVerified: false });
    expect(res.body.token.split('.')).toHaveLength(3);
    const lifetimeMs = Date.parse(res.body.expiresAt) - before;
    expect(lifetimeMs).toBeGreaterThan(3500_000);
    expect(lifetimeMs).toBeLessThanOrEqual(3605_000);

    const me = await api.get('/api/account/me', { token: res.body.token });
    expect(me.status).toBe(200);
    expect(Object.keys(me.body).sort()).toEqual(PROFILE_KEYS);
    expect(me.body).toMatchObject({
      id: res.body.account.id,
      email,
      firstName: 'Ada',
      lastName: 'Lovelace',
      fullName: 'Ada Lovelace',
      dateOfBirth: '1990-05-17',
      phone: '+61 400 000 000',
      city: 'Sydney',
      addressLine1: null,
      country: null,
      emailVerified: false,
    });
    expect(Number.isNaN(Date.parse(me.body.createdAt))).toBe(false);
  });

  it('answers 409 for an email that already has an account, in any letter case', async () => {
    const { email } = await signUp();
    const res = await api.post('/api/account/signup', signupBody(email.toUpperCase()));
    expectProblem(res, 409);
  });

  it('names every invalid field', async () => {
    const res = await api.post('/api/account/signup', { email: 'not-an-email', password: 'short', firstName: '', dateOfBirth: '2001-02-29' });
    expectProblem(res, 400);
    expect(res.body.title).toBe('One or more validation errors occurred.');
    expect(Object.keys(res.body.errors).sort()).toEqual(['dateOfBirth', 'email', 'firstName', 'lastName', 'password']);
  });

  it.each([
    ['a non-date', 'yesterday'],
    ['a day that does not exist', '1990-02-30'],
    ['a month that does not exist', '1990-13-01'],
    ['a date-time', '1990-05-17T00:00:00Z'],
    ['a future date', '2999-01-01'],
    ['today', new Date().toISOString().slice(0, 10)],
  ])('refuses %s as dateOfBirth', async (_what, dateOfBirth) => {
    const res = await api.post('/api/account/signup', signupBody(newEmail(), { dateOfBirth }));
    expectProblem(res, 400);
    expect(Object.keys(res.body.errors)).toEqual(['dateOfBirth']);
  });

  it('requires a password of 8 to 128 characters', async () => {
    for (const [password, status] of [['x'.repeat(7), 400], ['x'.repeat(129), 400], ['x'.repeat(128), 200]] as const) {
      const res = await api.post('/api/account/signup', signupBody(newEmail(), { password }));
      expect(res.status).toBe(status);
      if (status === 400) expect(Object.keys(res.body.errors)).toEqual(['password']);
    }
  });
});

describe('POST /api/account/login', () => {
  it('returns a customer sign-in result for the right password, with the email in any case', async () => {
    const { email, id } = await signUp();
    const res = await api.post('/api/account/login', { email: email.toUpperCase(), password: PASSWORD });
    expect(res.status).toBe(200);
    expect(res.body.account).toEqual({ id, email, fullName: 'Ada Lovelace', emailVerified: false });
    expect((await api.get('/api/account/me', { token: res.body.token })).status).toBe(200);
  });

  it('answers the same 401 for a wrong password and an unknown email', async () => {
    const { email } = await signUp();
    const wrong = await api.post('/api/account/login', { email, password: 'wrong-password' });
    const unknown = await api.post('/api/account/login', { email: newEmail(), password: 'wrong-password' });
    expectProblem(wrong, 401);
    expectProblem(unknown, 401);
    expect(unknown.body.detail).toBe(wrong.body.detail);
    expect(unknown.body.type).toBe(wrong.body.type);
  });

  it('validates the body', async () => {
    const res = await api.post('/api/account/login', { email: 'nope' });
    expectProblem(res, 400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['email', 'password']);
  });
});

describe('login lockout (default policy: 5 failures, 15 minutes)', () => {
  it('counts concurrent failures: five at once lock the email, even for the right password', async () => {
    const { email } = await signUp();
    const results = await Promise.all(Array.from({ length: 5 }, () => api.post('/api/account/login', { email, password: 'wrong-password' })));
    expect(results.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    const refused = await api.post('/api/account/login', { email, password: PASSWORD });
    expectProblem(refused, 429, 'account-locked');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
  });
});

describe('customer tokens', () => {
  it('are accepted only on customer endpoints, and only customer tokens are accepted there', async () => {
    const { token } = await signUp();
    expect((await api.get('/api/Merchants/me', { token })).status).toBe(401);
    expect((await api.post('/api/admin/accounts/00000000-0000-4000-8000-000000000000/suspend', undefined, { token })).status).toBe(401);
    expect((await api.get('/api/ApiKeys', { token })).status).toBe(401);

    const merchant = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, merchant.id);
    expectProblem(await api.get('/api/account/me', { token: key.key }), 401);
    expectProblem(await api.get('/api/account/me', { token: admin }), 401);
    expectProblem(await api.get('/api/account/me'), 401);
    expectProblem(await api.get('/api/account/me', { headers: { authorization: `bearer ${token}` } }), 401);
  });
});

describe('PUT /api/account/profile', () => {
  it('updates the profile: names replaced, absent fields kept, null clears', async () => {
    const { token, id } = await signUp(api, { phone: '0400 000 000', city: 'Sydney' });
    const res = await api.put('/api/account/profile', { accountId: id, firstName: 'Augusta', lastName: 'King', addressLine1: '1 Main St', country: 'AU', phone: null }, { token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(PROFILE_KEYS);
    expect(res.body).toMatchObject({ id, firstName: 'Augusta', lastName: 'King', fullName: 'Augusta King', addressLine1: '1 Main St', country: 'AU', phone: null, city: 'Sydney', dateOfBirth: '1990-05-17' });
    const me = await api.get('/api/account/me', { token });
    expect(me.body).toEqual(res.body);
    // Strings are stored and returned as sent, an empty one too (it is not a null).
    const empty = await api.put('/api/account/profile', { firstName: 'Augusta', lastName: 'King', city: '', state: '', phone: ' ' }, { token });
    expect(empty.body).toMatchObject({ city: '', state: '', phone: ' ', addressLine1: '1 Main St' });
    expect((await api.get('/api/account/me', { token })).body).toMatchObject({ city: '', state: '', phone: ' ' });
  });

  it('accepts a new dateOfBirth and refuses an impossible one', async () => {
    const { token } = await signUp();
    const ok = await api.put('/api/account/profile', { firstName: 'A', lastName: 'B', dateOfBirth: '1985-12-31' }, { token });
    expect(ok.status).toBe(200);
    expect(ok.body.dateOfBirth).toBe('1985-12-31');
    const bad = await api.put('/api/account/profile', { firstName: 'A', lastName: 'B', dateOfBirth: '1985-02-29' }, { token });
    expectProblem(bad, 400);
    expect(Object.keys(bad.body.errors)).toEqual(['dateOfBirth']);
  });

  it('requires firstName and lastName', async () => {
    const { token } = await signUp();
    const res = await api.put('/api/account/profile', { city: 'Perth' }, { token });
    expectProblem(res, 400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['firstName', 'lastName']);
  });

  it("refuses another account's id with 403 and changes nothing", async () => {
    const me = await signUp();
    const other = await signUp();
    const res = await api.put('/api/account/profile', { accountId: other.id, firstName: 'Mallory', lastName: 'X' }, { token: me.token });
    expectProblem(res, 403);
    expect((await api.get('/api/account/me', { token: other.token })).body.firstName).toBe('Ada');
    expect((await api.get('/api/account/me', { token: me.token })).body.firstName).toBe('Ada');
  });

  it('needs a customer token', async () => {
    expectProblem(await api.put('/api/account/profile', { firstName: 'A', lastName: 'B' }), 401);
    expectProblem(await api.put('/api/account/profile', { firstName: 'A', lastName: 'B' }, { token: admin }), 401);
  });
});

describe('email verification', () => {
  it('marks the email verified with the token from the sign-up email, once', async () => {
    const { email, token } = await signUp();
    const mail = await waitForMessage(dataDir, email, (m) => /verify-email\?token=/.test(m.text));
    const verification = tokenFromLink(mail.text, 'verify-email');

    expect((await api.post('/api/account/verify-email', { token: verification })).status).toBe(204);
    expect((await api.get('/api/account/me', { token })).body.emailVerified).toBe(true);
    expect((await api.post('/api/account/login', { email, password: PASSWORD })).body.account.emailVerified).toBe(true);

    const again = await api.post('/api/account/verify-email', { token: verification });
    expectProblem(again, 400);
    expect(Object.keys(again.body.errors)).toEqual(['token']);
  });

  it('refuses an unknown token and a missing one', async () => {
    expectProblem(await api.post('/api/account/verify-email', { token: 'not-a-token' }), 400);
    expectProblem(await api.post('/api/account/verify-email', {}), 400);
  });
});

describe('password reset', () => {
  it('forgot-password answers 202 alike for known and unknown emails, and mails a link only to the account', async () => {
    const { email } = await signUp();
    const stranger = newEmail();
    const forStranger = await api.post('/api/account/forgot-password', { email: stranger });
    const forAccount = await api.post('/api/account/forgot-password', { email });
    expect(forStranger.status).toBe(202);
    expect(forAccount.status).toBe(202);
    expect(forStranger.body).toEqual(forAccount.body);
    expect(forStranger.headers.get('content-type')).toBe(forAccount.headers.get('content-type'));

    const mail = await waitForMessage(dataDir, email, (m) => /reset-password\?token=/.test(m.text));
    expect(mail.subject).toMatch(/password/i);
    // The stranger's request was handled first; by now any email to it would have been written.
    expect(await messagesTo(dataDir, stranger)).toEqual([]);
  });

  it('forgot-password validates the email', async () => {
    const res = await api.post('/api/account/forgot-password', { email: 'nope' });
    expectProblem(res, 400);
    expect(Object.keys(res.body.errors)).toEqual(['email']);
  });

  it('sets a new password with the emailed token, once, and ends the old sessions', async () => {
    const { email, token: oldSession } = await signUp();
    expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const mail = await waitForMessage(dataDir, email, (m) => /reset-password\?token=/.test(m.text));
    const resetToken = tokenFromLink(mail.text, 'reset-password');

    expect((await api.post('/api/account/reset-password', { token: resetToken, newPassword: 'brand-new-password' })).status).toBe(204);
    expectProblem(await api.post('/api/account/login', { email, password: PASSWORD }), 401);
    const login = await api.post('/api/account/login', { email, password: 'brand-new-password' });
    expect(login.status).toBe(200);
    expect((await api.get('/api/account/me', { token: login.body.token })).status).toBe(200);
    expectProblem(await api.get('/api/account/me', { token: oldSession }), 401);

    const reuse = await api.post('/api/account/reset-password', { token: resetToken, newPassword: 'another-password' });
    expectProblem(reuse, 400);
    expect(Object.keys(reuse.body.errors)).toEqual(['token']);
  });

  it('refuses an unknown token, an expired token and a too-short password', async () => {
    const { id } = await signUp();
    expectProblem(await api.post('/api/account/reset-password', { token: 'AAAA', newPassword: 'long-enough-1' }), 400);

    const issued = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    const short = await api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'short' });
    expectProblem(short, 400);
    expect(Object.keys(short.body.errors)).toEqual(['newPassword']);

    const db = new pg.Client({ connectionString: inject('databaseUrl') });
    await db.connect();
    try {
      const hash = createHash('sha256').update(issued.body.token).digest('hex');
      const updated = await db.query(`update identity.customer_tokens set expires_at = now() - interval '1 second' where token_hash = $1`, [hash]);
      expect(updated.rowCount).toBe(1);
    } finally {
      await db.end();
    }
    const expired = await api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'long-enough-1' });
    expectProblem(expired, 400);
    expect(Object.keys(expired.body.errors)).toEqual(['token']);
  });

  it('lets exactly one of two concurrent uses of a token succeed', async () => {
    const { email, id } = await signUp();
    const issued = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect(issued.status).toBe(200);
    const [a, b] = await Promise.all([
      api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'first-password-1' }),
      api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'second-password-2' }),
    ]);
    expect([a.status, b.status].sort()).toEqual([204, 400]);
    const winner = a.status === 204 ? 'first-password-1' : 'second-password-2';
    const loser = a.status === 204 ? 'second-password-2' : 'first-password-1';
    expect((await api.post('/api/account/login', { email, password: winner })).status).toBe(200);
    expect((await api.post('/api/account/login', { email, password: loser })).status).toBe(401);
  });
});

describe('the date of birth across password resets', () => {
  it('keeps the one given at signup through an emailed reset and a support-desk reset', async () => {
    const { email, id } = await signUp(api, { dateOfBirth: '1984-02-29' });
    expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const mail = await waitForMessage(dataDir, email, (m) => /reset-password\?token=/.test(m.text));
    expect((await api.post('/api/account/reset-password', { token: tokenFromLink(mail.text, 'reset-password'), newPassword: 'emailed-reset-pw' })).status).toBe(204);
    const emailed = await api.post('/api/account/login', { email, password: 'emailed-reset-pw' });
    expect((await api.get('/api/account/me', { token: emailed.body.token })).body).toMatchObject({ id, dateOfBirth: '1984-02-29' });

    const issued = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect((await api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'support-desk-pw' })).status).toBe(204);
    const handed = await api.post('/api/account/login', { email, password: 'support-desk-pw' });
    expect((await api.get('/api/account/me', { token: handed.body.token })).body).toMatchObject({ id, dateOfBirth: '1984-02-29' });
  });
});

describe('email verification by password reset', () => {
  it('verifies the email with a reset from the forgot-password email, when the verification link was never used', async () => {
    const { email } = await signUp();
    expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const mail = await waitForMessage(dataDir, email, (m) => /reset-password\?token=/.test(m.text));
    expect((await api.post('/api/account/reset-password', { token: tokenFromLink(mail.text, 'reset-password'), newPassword: 'emailed-reset-pw' })).status).toBe(204);
    const login = await api.post('/api/account/login', { email, password: 'emailed-reset-pw' });
    expect(login.body.account.emailVerified).toBe(true);
    expect((await api.get('/api/account/me', { token: login.body.token })).body.emailVerified).toBe(true);
  });

  it('leaves the email unverified after a reset with a support-desk token (handed to the admin, not emailed)', async () => {
    const { email, id } = await signUp();
    const issued = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect((await api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'support-desk-pw' })).status).toBe(204);
    const login = await api.post('/api/account/login', { email, password: 'support-desk-pw' });
    expect(login.body.account.emailVerified).toBe(false);
    expect((await api.get('/api/account/me', { token: login.body.token })).body.emailVerified).toBe(false);
  });
});

describe('claiming the unclaimed account of an invitation', () => {
  let merchant: { id: string; key: string };
  beforeAll(async () => {
    const { id } = await createMerchant(api, admin);
    merchant = { id, key: (await createApiKey(api, admin, id)).key };
  });

  /** An unclaimed account made by an invitation that gave the email a phone. */
  async function invited(): Promise<string> {
    const email = newEmail();
    const res = await api.post('/api/Invitations', { merchantId: merchant.id, firstName: 'Invited', lastName: 'Person', email, phone: '+61 412 345 678' }, { token: merchant.key });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return email;
  }

  it('signup sets the whole profile from its body: the phone the merchant stored is not shown to the claimant', async () => {
    const email = await invited();
    const claim = await api.post('/api/account/signup', signupBody(email));
    expect(claim.status).toBe(200);
    const me = await api.get('/api/account/me', { token: claim.body.token });
    expect(me.body).toMatchObject({
      email, firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17', emailVerified: false,
      phone: null, addressLine1: null, addressLine2: null, city: null, state: null, postCode: null, country: null,
    });
    // Contact fields the signup gives are stored as given.
    const other = await invited();
    const given = await api.post('/api/account/signup', signupBody(other, { phone: '+61 499 999 999', city: 'Perth' }));
    expect((await api.get('/api/account/me', { token: given.body.token })).body).toMatchObject({ phone: '+61 499 999 999', city: 'Perth', country: null });
  });

  /** Claims the unclaimed account of `email` through the forgot-password email's reset link; the login after it. */
  const claimByReset = async (email: string) => {
    expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const mail = await waitForMessage(dataDir, email, (m) => /reset-password\?token=/.test(m.text));
    expect((await api.post('/api/account/reset-password', { token: tokenFromLink(mail.text, 'reset-password'), newPassword: 'claimed-by-reset' })).status).toBe(204);
    return api.post('/api/account/login', { email, password: 'claimed-by-reset' });
  };

  it('a reset from the forgot-password email claims it keeping the stored profile, and verifies the email', async () => {
    const email = await invited();
    const login = await claimByReset(email);
    expect(login.status).toBe(200);
    expect((await api.get('/api/account/me', { token: login.body.token })).body).toMatchObject({ email, firstName: 'Invited', phone: '+61 412 345 678', emailVerified: true });
    expectProblem(await api.post('/api/account/signup', signupBody(email)), 409);
  });

  it('an account claimed by a reset has no date of birth (an invitation collects none) until the profile sets one, which later resets keep', async () => {
    const email = await invited();
    const login = await claimByReset(email);
    const token = login.body.token;
    expect((await api.get('/api/account/me', { token })).body.dateOfBirth).toBeNull();
    const set = await api.put('/api/account/profile', { firstName: 'Invited', lastName: 'Person', dateOfBirth: '1975-10-01' }, { token });
    expect(set.status).toBe(200);
    expect(set.body.dateOfBirth).toBe('1975-10-01');
    const id = set.body.id;
    const issued = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect((await api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'support-desk-pw' })).status).toBe(204);
    const again = await api.post('/api/account/login', { email, password: 'support-desk-pw' });
    expect((await api.get('/api/account/me', { token: again.body.token })).body).toMatchObject({ id, dateOfBirth: '1975-10-01' });
  });
});

describe('POST /api/admin/accounts/{id}/password-reset', () => {
  it('returns a one-hour token that resets the password', async () => {
    const { email, id } = await signUp();
    const before = Date.now();
    const res = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['expiresAt', 'token']);
    expect(res.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const lifetimeMs = Date.parse(res.body.expiresAt) - before;
    expect(lifetimeMs).toBeGreaterThan(3500_000);
    expect(lifetimeMs).toBeLessThanOrEqual(3605_000);
    expect((await api.post('/api/account/reset-password', { token: res.body.token, newPassword: 'support-desk-pw' })).status).toBe(204);
    expect((await api.post('/api/account/login', { email, password: 'support-desk-pw' })).status).toBe(200);
  });

  it('answers 404 for an unknown account, 400 for a malformed id and 401 without the admin token', async () => {
    const { id, token } = await signUp();
    expectProblem(await api.post('/api/admin/accounts/00000000-0000-4000-8000-000000000000/password-reset', undefined, { token: admin }), 404);
    expectProblem(await api.post('/api/admin/accounts/not-a-uuid/password-reset', undefined, { token: admin }), 400);
    expectProblem(await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token }), 401);
  });
});

describe('suspension', () => {
  it('ends the tokens on the next request, answers 403 at login, and unsuspending allows new logins', async () => {
    const { email, id, token } = await signUp();
    expect((await api.get('/api/account/me', { token })).status).toBe(200);

    expect((await api.post(`/api/admin/accounts/${id}/suspend`, undefined, { token: admin })).status).toBe(204);
    expectProblem(await api.get('/api/account/me', { token }), 401);
    expectProblem(await api.put('/api/account/profile', { firstName: 'A', lastName: 'B' }, { token }), 401);

    const login = await api.post('/api/account/login', { email, password: PASSWORD });
    expectProblem(login, 403, 'account-suspended');
    expectProblem(await api.post('/api/account/login', { email, password: 'wrong-password' }), 401);
    // Idempotent.
    expect((await api.post(`/api/admin/accounts/${id}/suspend`, undefined, { token: admin })).status).toBe(204);

    expect((await api.post(`/api/admin/accounts/${id}/unsuspend`, undefined, { token: admin })).status).toBe(204);
    expect((await api.post(`/api/admin/accounts/${id}/unsuspend`, undefined, { token: admin })).status).toBe(204);
    const again = await api.post('/api/account/login', { email, password: PASSWORD });
    expect(again.status).toBe(200);
    expect((await api.get('/api/account/me', { token: again.body.token })).status).toBe(200);
    expectProblem(await api.get('/api/account/me', { token }), 401);
  });

  // A login whose password check is under way when the account is suspended must not hand out a
  // token that outlives the suspension (the check takes hundreds of milliseconds).
  it('a login racing the suspension yields no working token', async () => {
    const { email, id } = await signUp();
    const login = api.post('/api/account/login', { email, password: PASSWORD });
    await new Promise((r) => setTimeout(r, 100));
    expect((await api.post(`/api/admin/accounts/${id}/suspend`, undefined, { token: admin })).status).toBe(204);
    const res = await login;
    if (res.status === 200) {
      // Checked on an endpoint that trusts the token alone (it does not read the account).
      expectProblem(await api.get('/api/onboard/00000000-0000-4000-8000-000000000000', { token: res.body.token }), 401);
    } else {
      expectProblem(res, 403, 'account-suspended');
    }
  });

  it('a login with the old password racing a password reset yields no working token', async () => {
    const { email, id } = await signUp();
    const reset = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect(reset.status).toBe(200);
    // The reset hashes the new password before it commits: the login starts meanwhile, so that
    // the reset lands while the login checks the old password.
    const done = api.post('/api/account/reset-password', { token: reset.body.token, newPassword: 'another-password-9' });
    await new Promise((r) => setTimeout(r, 100));
    const res = await api.post('/api/account/login', { email, password: PASSWORD });
    expect((await done).status).toBe(204);
    if (res.status === 200) expectProblem(await api.get('/api/onboard/00000000-0000-4000-8000-000000000000', { token: res.body.token }), 401);
    else expectProblem(res, 401);
  });

  it('answers 404 for an unknown account and 401 for a non-admin', async () => {
    const { id, token } = await signUp();
    expectProblem(await api.post('/api/admin/accounts/00000000-0000-4000-8000-000000000000/suspend', undefined, { token: admin }), 404);
    expectProblem(await api.post('/api/admin/accounts/00000000-0000-4000-8000-000000000000/unsuspend', undefined, { token: admin }), 404);
    expectProblem(await api.post(`/api/admin/accounts/${id}/suspend`, undefined, { token }), 401);
  });
});

/**
 * Lockout and claiming run against a second identity (and a gateway in front of it) on the same
 * database, started with a 2-second lockout window; the claim test also calls identity's gRPC
 * EnsureCustomerAccount directly, as the invitation and checkout features will.
 */
describe('with a 2-second lockout window', () => {
  let platform: Awaited<ReturnType<typeof startPlatform>>;
  let locked: ApiClient;
  let customers: ServiceClient<'identity.v1.Customers'>;

  beforeAll(async () => {
    platform = await startPlatform({
      ...besideSharedPlatform(),
      services: ['identity', 'gateway'],
      serviceEnv: {
        identity: { CUSTOMER_LOCKOUT_SECONDS: '2', CUSTOMER_LOCKOUT_THRESHOLD: '5' },
        // Ten concurrent logins are ten scrypt hashes at OWASP cost on a small test machine: allow them time.
        gateway: { GRPC_DEADLINE_MS: '60000' },
      },
    });
    locked = apiClient(platform.gatewayUrl!);
    // Identity answers Customers to the gateway only: call it with the gateway's certificate.
    configureGrpcTransport({ PLATFORM_MODE: 'test', ...platform.grpcCerts.envFor('gateway') });
    customers = createClient('identity.v1.Customers', platform.processes.identity!.address, 10_000);
  }, 120_000);

  afterAll(async () => {
    customers?.close();
    await platform?.stop();
  });

  const login = (email: string, password: string) => locked.post('/api/account/login', { email, password });

  it('locks an email after 5 consecutive failures, even for the right password, until the window ends', async () => {
    const { email } = await signUp(locked);
    for (let i = 0; i < 5; i++) expectProblem(await login(email, 'wrong-password'), 401);
    const refused = await login(email, PASSWORD);
    expectProblem(refused, 429, 'account-locked');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(2);

    await new Promise((r) => setTimeout(r, retryAfter * 1000 + 200));
    expect((await login(email, PASSWORD)).status).toBe(200);
  });

  it('resets the count on a successful login', async () => {
    const { email } = await signUp(locked);
    for (let i = 0; i < 4; i++) expect((await login(email, 'wrong-password')).status).toBe(401);
    expect((await login(email, PASSWORD)).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await login(email, 'wrong-password')).status).toBe(401);
    expect((await login(email, PASSWORD)).status).toBe(200);
  });

  it('locks an unknown email exactly like a known one', async () => {
    const stranger = newEmail();
    for (let i = 0; i < 5; i++) expectProblem(await login(stranger, 'wrong-password'), 401);
    expectProblem(await login(stranger, 'wrong-password'), 429, 'account-locked');
  });

  it('EnsureCustomerAccount creates an unclaimed account once, and signup claims it', async () => {
    const email = newEmail();
    const first = await customers.EnsureCustomerAccount({ email: email.toUpperCase(), firstName: 'Invited', lastName: 'Person', phone: '0400 111 222' });
    expect(first).toMatchObject({ created: true, claimed: false });
    const second = await customers.EnsureCustomerAccount({ email, firstName: 'Other', lastName: 'Name' });
    expect(second).toEqual({ id: first.id, created: false, claimed: false });

    // No password yet: login fails like a wrong password.
    expectProblem(await login(email, PASSWORD), 401);

    const claim = await locked.post('/api/account/signup', signupBody(email, { firstName: 'Claimed', lastName: 'Owner' }));
    expect(claim.status).toBe(200);
    expect(claim.body.account).toMatchObject({ id: first.id, email, fullName: 'Claimed Owner' });
    const me = await locked.get('/api/account/me', { token: claim.body.token });
    // The profile is the signup's alone: the phone the account was created with is not kept.
    expect(me.body).toMatchObject({ id: first.id, firstName: 'Claimed', phone: null, dateOfBirth: '1990-05-17' });

    expectProblem(await locked.post('/api/account/signup', signupBody(email)), 409);
    expect(await customers.EnsureCustomerAccount({ email, firstName: 'X', lastName: 'Y' })).toEqual({ id: first.id, created: false, claimed: true });
  });

  it('signup does not claim, nor hand a token for, an unclaimed account the platform suspended', async () => {
    const email = newEmail();
    const { id } = await customers.EnsureCustomerAccount({ email, firstName: 'Checkout', lastName: 'Customer' });
    expect((await api.post(`/api/admin/accounts/${id}/suspend`, undefined, { token: admin })).status).toBe(204);

    const refused = await locked.post('/api/account/signup', signupBody(email));
    expectProblem(refused, 403, 'account-suspended');
    expect(refused.body.token).toBeUndefined();
    expect(await customers.EnsureCustomerAccount({ email, firstName: 'X', lastName: 'Y' })).toEqual({ id, created: false, claimed: false });

    expect((await api.post(`/api/admin/accounts/${id}/unsuspend`, undefined, { token: admin })).status).toBe(204);
    const claim = await locked.post('/api/account/signup', signupBody(email));
    expect(claim.status).toBe(200);
    expect(claim.body.account.id).toBe(id);
  });
});
