import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { captureBank, complete, openSession, setUpCheckoutMerchant, type CheckoutMerchant } from '../support/checkout-fixtures.js';
import { apiClient, createMerchant, unique } from '../support/fixtures.js';
import { messagesTo, waitForMessage } from '../support/mailbox.js';

// Regression: emails were lower-cased when stored and returned lower-cased. Every email the
// platform stores is kept and returned exactly as sent, while uniqueness, lookups, sign-in and
// lockout still compare emails case-insensitively.

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const dataDir = inject('dataDir');
const db = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
afterAll(() => db.end());

const PASSWORD = 'correct-horse-42';
/** A new address with upper- and lower-case letters in both of its parts. */
const mixedEmail = (prefix: string) => `${prefix}-${unique('Mx')}@Ex.COM`;
/** The same address in two other letter cases. */
const otherCases = (email: string) => [email.toLowerCase(), email.toUpperCase()];

const signupBody = (email: string, extra: Record<string, unknown> = {}) => ({ email, password: PASSWORD, firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17', ...extra });

async function signUp(email: string) {
  const res = await api.post('/api/account/signup', signupBody(email));
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { id: res.body.account.id as string, token: res.body.token as string, account: res.body.account };
}

async function storedAccountEmails(email: string): Promise<{ id: string; email: string }[]> {
  return (await db.query('select id, email from identity.customer_accounts where lower(email) = lower($1)', [email])).rows;
}

describe('customer accounts', () => {
  it('signup stores and returns the email as sent; the address in another case is 409 at signup and signs in', async () => {
    const email = mixedEmail('Acct');
    const { id, token, account } = await signUp(email);
    expect(account).toEqual({ id, email, fullName: 'Ada Lovelace', emailVerified: false });
    expect((await api.get('/api/account/me', { token })).body.email).toBe(email);
    expect(await storedAccountEmails(email)).toEqual([{ id, email }]);

    for (const typed of otherCases(email)) {
      expect((await api.post('/api/account/signup', signupBody(typed))).status).toBe(409);
      const login = await api.post('/api/account/login', { email: typed, password: PASSWORD });
      expect(login.status).toBe(200);
      expect(login.body.account).toEqual({ id, email, fullName: 'Ada Lovelace', emailVerified: false });
    }
    expect(await storedAccountEmails(email)).toEqual([{ id, email }]);
  });

  it('forgot-password in another case mails the reset link to the email as stored', async () => {
    const email = mixedEmail('Forgot');
    await signUp(email);
    expect((await api.post('/api/account/forgot-password', { email: email.toUpperCase() })).status).toBe(202);
    const mail = await waitForMessage(dataDir, email, (m) => /reset-password\?token=/.test(m.text));
    expect(mail.to).toBe(email);
  });

  it('failures in different cases lock the email together, and a password reset clears that lock', async () => {
    const email = mixedEmail('Locked');
    const { id } = await signUp(email);
    for (const typed of [email, email.toLowerCase(), email.toUpperCase(), email.toLowerCase(), email]) {
      expect((await api.post('/api/account/login', { email: typed, password: 'wrong-password' })).status).toBe(401);
    }
    for (const typed of [email, ...otherCases(email)]) {
      const refused = await api.post('/api/account/login', { email: typed, password: PASSWORD });
      expect(refused.status).toBe(429);
      expect(refused.body.type).toMatch(/\/account-locked$/);
    }
    expect((await db.query('select email from identity.login_failures where kind = $1 and lower(email) = lower($2)', ['customer', email])).rows).toEqual([
      { email: email.toLowerCase() },
    ]);

    const issued = await api.post(`/api/admin/accounts/${id}/password-reset`, undefined, { token: admin });
    expect((await api.post('/api/account/reset-password', { token: issued.body.token, newPassword: 'brand-new-password' })).status).toBe(204);
    const login = await api.post('/api/account/login', { email: email.toUpperCase(), password: 'brand-new-password' });
    expect(login.status).toBe(200);
    expect(login.body.account.email).toBe(email);
  });

  describe('accounts an invitation or a checkout created', () => {
    let m: TestMerchant;
    let shop: CheckoutMerchant;
    beforeAll(async () => {
      [m, shop] = await Promise.all([setUpMerchant(api, admin), setUpCheckoutMerchant(api, admin)]);
    });

    it('an invitation keeps the email as the merchant sent it; signup in another case claims that account and stores the email as typed', async () => {
      const invited = mixedEmail('Invitee');
      const inv = await api.post('/api/Invitations', { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', email: invited }, { token: m.key });
      expect(inv.status).toBe(200);
      expect(inv.body.email).toBe(invited);
      expect((await api.get(`/api/Invitations/${inv.body.invitationId}`, { token: m.key })).body.email).toBe(invited);
      const preview = await api.post('/api/onboard/preview', { token: inv.body.token });
      expect(preview.body).toMatchObject({ email: invited, accountState: 'Unclaimed' });
      expect((await messagesTo(dataDir, invited)).map((mail) => mail.to)).toEqual([invited]);
      const [unclaimed] = await storedAccountEmails(invited);
      expect(unclaimed).toEqual({ id: expect.any(String), email: invited });

      const typed = invited.toLowerCase();
      const claim = await signUp(typed);
      expect(claim.id).toBe(unclaimed!.id);
      expect(claim.account.email).toBe(typed);
      expect(await storedAccountEmails(invited)).toEqual([{ id: unclaimed!.id, email: typed }]);
      expect((await api.post('/api/onboard/preview', { token: inv.body.token })).body).toMatchObject({ email: invited, accountState: 'Claimed' });

      // Another invitation in yet another case finds the claimed account and makes none.
      const again = await api.post('/api/Invitations', { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', email: invited.toUpperCase() }, { token: m.key });
      expect(again.body.email).toBe(invited.toUpperCase());
      expect((await api.post('/api/onboard/preview', { token: again.body.token })).body.accountState).toBe('Claimed');
      expect(await storedAccountEmails(invited)).toEqual([{ id: unclaimed!.id, email: typed }]);
    });

    it("a checkout keeps the session's email on the account, member and event; the address in another case is the same account and member", async () => {
      const email = mixedEmail('Buyer');
      const s = await openSession(api, shop, { customer: { email, firstName: 'Grace', lastName: 'Hopper' } });
      expect((await api.get('/api/Checkout/sessions/me', { token: s.token })).body.customer.email).toBe(email);
      const done = await complete(api, s, await captureBank(api, s));
      expect(done.status, JSON.stringify(done.body)).toBe(200);

      const event = (await db.query(`select data from checkout.outbox where type = 'checkout.completed' and data->>'sessionId' = $1`, [s.sessionId])).rows[0]!.data;
      expect(event.email).toBe(email);
      expect(await storedAccountEmails(email)).toEqual([{ id: event.customerAccountId, email }]);
      const members = await api.get(`/api/Members?merchantId=${shop.id}&email=${encodeURIComponent(email.toLowerCase())}`, { token: shop.key });
      expect(members.body.items.map((x: { id: string; email: string }) => [x.id, x.email])).toEqual([[event.memberId, email]]);

      // The same address in another case: the member's live subscription refuses a second one.
      const second = await openSession(api, shop, { customer: { email: email.toUpperCase(), firstName: 'Grace', lastName: 'Hopper' } });
      const refused = await complete(api, second, await captureBank(api, second));
      expect(refused.status).toBe(409);
      expect(refused.body.failureReason).toMatch(/live subscription/);

      const claim = await signUp(email.toLowerCase());
      expect(claim.id).toBe(event.customerAccountId);
    });
  });
});

describe('merchant users', () => {
  it('create stores and returns the email as sent; the address in another case is 409, for any merchant; login in any case answers the user as stored', async () => {
    const [m, other] = await Promise.all([createMerchant(api, admin), createMerchant(api, admin)]);
    const email = mixedEmail('Owner');
    const created = await api.post(`/api/admin/merchants/${m.id}/users`, { email, password: PASSWORD, fullName: 'Olive Owner', role: 'Owner' }, { token: admin });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.any(String), merchantId: m.id, email, fullName: 'Olive Owner', role: 'Owner', isActive: true });
    expect((await api.get(`/api/admin/merchants/${m.id}/users/${created.body.id}`, { token: admin })).body.email).toBe(email);
    expect((await api.get(`/api/admin/merchants/${m.id}/users`, { token: admin })).body.items.map((u: { email: string }) => u.email)).toEqual([email]);
    expect((await db.query('select email from identity.merchant_users where id = $1', [created.body.id])).rows).toEqual([{ email }]);

    for (const typed of otherCases(email)) {
      for (const merchant of [m, other]) {
        const dup = await api.post(`/api/admin/merchants/${merchant.id}/users`, { email: typed, password: PASSWORD, fullName: 'Twin', role: 'Staff' }, { token: admin });
        expect(dup.status).toBe(409);
      }
      const login = await api.post('/api/auth/login', { email: typed, password: PASSWORD });
      expect(login.status).toBe(200);
      expect(login.body.user).toEqual({ id: created.body.id, merchantId: m.id, email, fullName: 'Olive Owner', role: 'Owner' });
    }
  });

  it('failures in different cases lock the email together', async () => {
    const m = await createMerchant(api, admin);
    const email = mixedEmail('Staff');
    expect((await api.post(`/api/admin/merchants/${m.id}/users`, { email, password: PASSWORD, fullName: 'S', role: 'Staff' }, { token: admin })).status).toBe(201);
    for (const typed of [email, email.toLowerCase(), email.toUpperCase(), email.toLowerCase(), email]) {
      expect((await api.post('/api/auth/login', { email: typed, password: 'wrong-password' })).status).toBe(401);
    }
    for (const typed of [email, ...otherCases(email)]) {
      const refused = await api.post('/api/auth/login', { email: typed, password: PASSWORD });
      expect(refused.status).toBe(429);
      expect(refused.body.type).toMatch(/\/account-locked$/);
    }
  });
});

describe('members', () => {
  it('create returns the email as sent; a create in another case returns the existing member unchanged', async () => {
    const m = await setUpMerchant(api, admin);
    const email = mixedEmail('Member');
    const first = await api.post('/api/Members', { merchantId: m.id, email, firstName: 'Ada', lastName: 'Lovelace' }, { token: m.key });
    expect(first.status).toBe(201);
    expect(first.body.email).toBe(email);
    for (const typed of otherCases(email)) {
      const again = await api.post('/api/Members', { merchantId: m.id, email: typed, firstName: 'Someone', lastName: 'Else' }, { token: m.key });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      const found = await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(typed)}`, { token: m.key });
      expect(found.body.items).toEqual([first.body]);
    }
  });
});
