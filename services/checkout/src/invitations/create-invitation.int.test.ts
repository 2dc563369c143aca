import { randomBytes, randomUUID } from 'node:crypto';
import type { QBFilterQuery } from '@mikro-orm/postgresql';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { createLogger, DeliveryFailed, openDatabase, type EmailMessage, type SmsMessage } from '@billing/service-runtime';
import { sortsAndFilters } from '../../../../tests/support/list-plan.js';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import type { CheckoutBackends } from '../backends.js';
import { MIGRATIONS } from '../migrations/index.js';
import { createInvitation, invitationInserts, merchantNameOf } from './create-invitation.js';
import { Invitation } from './invitation.js';
import { INVITATION_LIST_ORDER, invitationListFilter } from './invitations-grpc.js';
import { MerchantNames } from './merchant-names.js';

// Creating invitations against a real Postgres database of its own, with billing's merchants and
// identity's accounts faked: the row written, and the merchant names kept for the emails.

const { orm } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'checkout', entities: ENTITIES }),
  schema: 'checkout',
  migrations: MIGRATIONS,
});

/** Invitation creation over fake backends: `names` are billing's merchants (absent: not_found). */
function invitationsWith(names: Map<string, string>, ttlMs: number, now: () => number = Date.now, failing: { email?: boolean; sms?: boolean } = {}) {
  const getMerchantCalls: string[] = [];
  const ensuredAccounts: string[] = [];
  const emails: EmailMessage[] = [];
  const texts: SmsMessage[] = [];
  const backends = {
    merchants: {
      GetMerchant: async (req: { id: string }) => {
        getMerchantCalls.push(req.id);
        await new Promise((resolve) => setTimeout(resolve, 5));
        const name = names.get(req.id);
        if (name === undefined) throw new DomainError('not_found', 'Merchant not found.');
        return { id: req.id, name };
      },
    },
    customers: {
      EnsureCustomerAccount: async (req: { email: string }) => {
        ensuredAccounts.push(req.email);
        return { id: randomUUID() };
      },
    },
  } as unknown as CheckoutBackends;
  const deps = {
    orm: orm(),
    backends,
    channels: {
      email: { send: async (m: EmailMessage) => (failing.email ? Promise.reject(new DeliveryFailed('smtp', 'EENVELOPE', 550)) : void emails.push(m)) },
      sms: { send: async (m: SmsMessage) => (failing.sms ? Promise.reject(new DeliveryFailed('file', 'EACCES')) : void texts.push(m)) },
      smsEnabled: true,
    },
    publicBaseUrl: 'https://pay.example.com',
    defaultExpiryDays: 7,
    merchantNameCacheMs: ttlMs,
    logger: createLogger('checkout-test', 'silent'),
    inserts: invitationInserts(orm()),
    merchantNames: new MerchantNames((merchantId) => merchantNameOf(backends, merchantId), ttlMs, now),
  };
  const invite = (merchantId: string, email = `${randomBytes(6).toString('hex')}@example.com`) =>
    createInvitation(deps, { kind: 'platform' }, { merchantId, firstName: 'Ada', lastName: "O'Brien", email, phone: '+61 400 000 000' });
  return { invite, getMerchantCalls, ensuredAccounts, emails, texts };
}

describe('createInvitation', () => {
  it('writes the row the ORM would write for the invitation', async () => {
    const merchantId = randomUUID();
    const { invite } = invitationsWith(new Map([[merchantId, 'Shop']]), 5_000);
    const { invitation } = await invite(merchantId);
    const written = await orm().em.fork().findOneOrFail(Invitation, { id: invitation.id });
    expect(written.toMessage()).toEqual(invitation.toMessage());

    const twin = Object.assign(new Invitation(), { ...written, id: randomUUID(), tokenHash: randomBytes(32).toString('hex') });
    await orm().em.fork().insertMany([twin]);
    const rows = await orm().em.getConnection().execute<{ row: Record<string, unknown> }[]>(
      `select to_jsonb(i) - 'id' - 'token_hash' as row from checkout.invitations i where id in (?, ?)`,
      [invitation.id, twin.id],
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]!.row).toEqual(rows[1]!.row);
    expect(rows[0]!.row).toMatchObject({ merchant_id: merchantId, first_name: 'Ada', last_name: "O'Brien", phone: '+61 400 000 000', account_id: null, revoked_at: null });
  });

  it('asks billing once for the concurrent invitations of one merchant, and names it in every email', async () => {
    const merchantId = randomUUID();
    const { invite, getMerchantCalls, emails } = invitationsWith(new Map([[merchantId, 'Corner Shop']]), 5_000);
    await Promise.all(Array.from({ length: 5 }, () => invite(merchantId)));
    expect(getMerchantCalls).toEqual([merchantId]);
    expect(emails).toHaveLength(5);
    for (const m of emails) expect(m.subject).toBe('Corner Shop invited you to sign up');
  });

  it('uses a renamed merchant\'s new name once the cache time has passed', async () => {
    const merchantId = randomUUID();
    let now = 0;
    const names = new Map([[merchantId, 'Old Name']]);
    const { invite, emails } = invitationsWith(names, 5_000, () => now);
    await invite(merchantId);
    names.set(merchantId, 'New Name');
    now = 4_000;
    await invite(merchantId);
    now = 5_000;
    await invite(merchantId);
    expect(emails.map((m) => m.subject)).toEqual(['Old Name invited you to sign up', 'Old Name invited you to sign up', 'New Name invited you to sign up']);
  });

  it('with CHECKOUT_MERCHANT_CACHE_MS 0 asks billing for every invitation', async () => {
    const merchantId = randomUUID();
    const { invite, getMerchantCalls } = invitationsWith(new Map([[merchantId, 'Shop']]), 0);
    await Promise.all([invite(merchantId), invite(merchantId)]);
    await invite(merchantId);
    expect(getMerchantCalls).toHaveLength(3);
  });

  it('refuses a missing merchant before creating an account, and does not remember the refusal', async () => {
    const merchantId = randomUUID();
    const names = new Map<string, string>();
    const { invite, getMerchantCalls, ensuredAccounts, emails } = invitationsWith(names, 5_000);
    const email = `${randomBytes(6).toString('hex')}@example.com`;
    const refused = await invite(merchantId, email).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject({ code: 'merchant_not_found', extensions: { outcome: 'MerchantNotFound' } });
    expect(ensuredAccounts).toEqual([]);
    expect(emails).toEqual([]);
    expect(await orm().em.fork().count(Invitation, { merchantId })).toBe(0);

    names.set(merchantId, 'Late Shop');
    await invite(merchantId, email);
    expect(getMerchantCalls).toEqual([merchantId, merchantId]);
    expect(ensuredAccounts).toEqual([email]);
    expect(emails.map((m) => m.subject)).toEqual(['Late Shop invited you to sign up']);
  });

  it('stores nothing and creates no account when the email cannot be delivered (delivery_failed)', async () => {
    const merchantId = randomUUID();
    const { invite, ensuredAccounts, texts } = invitationsWith(new Map([[merchantId, 'Shop']]), 5_000, Date.now, { email: true });
    const refused = await invite(merchantId).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject({ code: 'delivery_failed', message: expect.stringMatching(/not created/) });
    expect(await orm().em.fork().count(Invitation, { merchantId })).toBe(0);
    expect(ensuredAccounts).toEqual([]);
    expect(texts).toEqual([]);
  });

  it('keeps an invitation whose email went out when its SMS then fails', async () => {
    const merchantId = randomUUID();
    const { invite, ensuredAccounts, emails } = invitationsWith(new Map([[merchantId, 'Shop']]), 5_000, Date.now, { sms: true });
    const { invitation } = await invite(merchantId);
    expect(emails).toHaveLength(1);
    expect(ensuredAccounts).toHaveLength(1);
    expect(await orm().em.fork().count(Invitation, { id: invitation.id })).toBe(1);
  });
});

describe('ListInvitations', () => {
  it("finds a merchant's invitations of one email, in any case, from an index instead of reading all of them", async () => {
    const where = invitationListFilter(randomUUID(), { email: 'Ann@Example.com' }, new Date());
    const sql = orm().em.fork().createQueryBuilder(Invitation).select('*').where(where as QBFilterQuery<Invitation>).orderBy(INVITATION_LIST_ORDER).limit(50).getFormattedQuery();
    // With the index by merchant alone: every invitation of the merchant read, the other emails filtered out.
    expect(await sortsAndFilters(orm(), sql)).toEqual([]);
  });
});
