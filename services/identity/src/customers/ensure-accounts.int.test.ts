import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { openDatabase } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import { MIGRATIONS } from '../migrations/index.js';
import { byEmail } from '../email-match.js';
import { CustomerAccount } from './customer-account.js';
import { customersGrpc, toCustomerAccountMessage, type CustomersDeps } from './customers-grpc.js';
import { ENSURE_SQL, ensureAccounts } from './ensure-accounts.js';
import { sequentialScansOfGenericPlan } from '../../../../tests/support/generic-plan.js';

// EnsureCustomerAccount's one statement against a real Postgres database, batches and
// concurrent statements on separate connections, as several identity replicas would run them.

const { orm } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'identity', entities: ENTITIES, poolMax: 20 }),
  schema: 'identity',
  migrations: MIGRATIONS,
});

const email = () => `${randomBytes(6).toString('hex')}@example.com`;
const wanted = (e: string, more: { firstName?: string; phone?: string } = {}) => CustomerAccount.unclaimed({ email: e, firstName: 'Ada', lastName: 'Lovelace', ...more });

describe('ensureAccounts', () => {
  it('creates an unclaimed account for a new email, as the ORM reads it, and finds it after', async () => {
    const w = wanted(email(), { phone: '0400 111 222' });
    const before = Date.now();
    expect(await ensureAccounts(orm(), [w])).toEqual([{ id: w.id, created: true, claimed: false }]);
    const stored = await orm().em.fork().findOneOrFail(CustomerAccount, { email: w.email });
    expect(stored).toMatchObject({ id: w.id, firstName: 'Ada', lastName: 'Lovelace', phone: '0400 111 222', passwordHash: null, emailVerified: false, claimedAt: null, suspendedAt: null });
    expect(stored.createdAt.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(stored.updatedAt).toEqual(stored.createdAt);
    expect(await ensureAccounts(orm(), [wanted(w.email, { firstName: 'Other' })])).toEqual([{ id: w.id, created: false, claimed: false }]);
    expect((await orm().em.fork().findOneOrFail(CustomerAccount, { email: w.email })).firstName).toBe('Ada');
  });

  it('answers a mixed batch each its own: new, unclaimed, claimed, and one new email asked twice', async () => {
    const [unclaimed, claimed, fresh, twice] = [wanted(email()), wanted(email()), wanted(email()), wanted(email())];
    await ensureAccounts(orm(), [unclaimed, claimed]);
    await orm().em.fork().execute(`update customer_accounts set password_hash = 'hash', claimed_at = now() where email = ?`, [claimed.email]);
    const again = wanted(twice.email);
    const answers = await ensureAccounts(orm(), [wanted(unclaimed.email), fresh, twice, wanted(claimed.email), again]);
    expect(answers[0]).toEqual({ id: unclaimed.id, created: false, claimed: false });
    expect(answers[1]).toEqual({ id: fresh.id, created: true, claimed: false });
    expect(answers[3]).toEqual({ id: claimed.id, created: false, claimed: true });
    // The two requests for one new email share its account; only the one whose row went in created it.
    expect(answers[2]!.id).toBe(answers[4]!.id);
    expect([answers[2]!.created, answers[4]!.created].sort()).toEqual([false, true]);
    expect(await orm().em.fork().count(CustomerAccount, { email: twice.email })).toBe(1);
  });

  it('gives 20 concurrent statements for one new email one account, created once', async () => {
    const e = email();
    for (let round = 0; round < 3; round++) {
      const address = round === 0 ? e : email();
      const answers = (await Promise.all(Array.from({ length: 20 }, () => ensureAccounts(orm(), [wanted(address)])))).flat();
      expect(new Set(answers.map((a) => a.id)).size).toBe(1);
      expect(answers.filter((a) => a.created)).toHaveLength(1);
      expect(await orm().em.fork().count(CustomerAccount, { email: address })).toBe(1);
    }
  });

  it('keeps the email as given and finds the account by it in any letter case, one account per address', async () => {
    const given = `Ada.${randomBytes(6).toString('hex')}@Example.COM`;
    const first = wanted(given);
    expect(await ensureAccounts(orm(), [first])).toEqual([{ id: first.id, created: true, claimed: false }]);
    for (const other of [given.toLowerCase(), given.toUpperCase()]) {
      expect(await ensureAccounts(orm(), [wanted(other, { firstName: 'Other' })])).toEqual([{ id: first.id, created: false, claimed: false }]);
    }
    expect(await orm().em.fork().find(CustomerAccount, byEmail(given.toLowerCase()))).toMatchObject([{ id: first.id, email: given, firstName: 'Ada' }]);
  });

  it('gives one new address asked for in several letter cases, in one batch and in concurrent statements, one account', async () => {
    const base = `grace.${randomBytes(6).toString('hex')}@example.com`;
    const cases = [base, base.toUpperCase(), `Grace${base.slice(5)}`];
    const batch = cases.map((e) => wanted(e));
    const answers = await ensureAccounts(orm(), batch);
    expect(new Set(answers.map((a) => a.id)).size).toBe(1);
    expect(answers.filter((a) => a.created)).toHaveLength(1);
    const stored = await orm().em.fork().find(CustomerAccount, byEmail(base));
    expect(stored).toHaveLength(1);
    // The request whose row went in gave the stored spelling.
    expect(stored[0]!.email).toBe(batch[answers.findIndex((a) => a.created)]!.email);

    const next = `hopper.${randomBytes(6).toString('hex')}@example.com`;
    const racing = (await Promise.all(Array.from({ length: 20 }, (_, i) => ensureAccounts(orm(), [wanted(i % 2 ? next.toUpperCase() : next)])))).flat();
    expect(new Set(racing.map((a) => a.id)).size).toBe(1);
    expect(racing.filter((a) => a.created)).toHaveLength(1);
    expect(await orm().em.fork().count(CustomerAccount, byEmail(next))).toBe(1);
  });
});

describe('the statement on a table of many accounts', () => {
  it('finds the accounts already there by index: its generic plan (a named statement keeps it) scans no table', async () => {
    const em = orm().em.fork();
    await em.execute(`insert into customer_accounts (id, email, first_name, last_name, created_at, updated_at)
      select gen_random_uuid(), 'many' || g || '@example.com', 'A', 'B', now(), now() from generate_series(1, 20000) g`);
    await em.execute('analyze customer_accounts');
    const batch = [wanted(email()), wanted('many7@example.com')].map((w) => ({ id: w.id, email: w.email, first_name: 'A', last_name: 'B', phone: null, created_at: w.createdAt.toISOString() }));
    expect(await sequentialScansOfGenericPlan(orm(), 'identity', ENSURE_SQL, [JSON.stringify(batch)])).toEqual([]);
    // And it still answers the account that was there.
    const there = await em.findOneOrFail(CustomerAccount, byEmail('MANY7@example.com'));
    expect((await ensureAccounts(orm(), [wanted('Many7@Example.com')]))[0]).toEqual({ id: there.id, created: false, claimed: false });
  }, 30_000);
});

describe('GetCustomerAccount', () => {
  it('answers concurrent reads (one batch) each with its own account, as the ORM loads it; an unknown or malformed id is not found', async () => {
    const [a, b] = [wanted(email(), { phone: '0400 111 222' }), wanted(email())];
    await ensureAccounts(orm(), [a, b]);
    const customers = customersGrpc({ orm: orm() } as CustomersDeps);
    const ids = [a.id, b.id, a.id.toUpperCase(), randomUUID(), 'not-a-uuid'];
    const answers = await Promise.allSettled(ids.map((id) => customers.GetCustomerAccount({ id }, undefined)));
    const expected = async (id: string) => toCustomerAccountMessage(await orm().em.fork().findOneOrFail(CustomerAccount, { id }));
    expect(answers.slice(0, 3)).toEqual([
      { status: 'fulfilled', value: await expected(a.id) },
      { status: 'fulfilled', value: await expected(b.id) },
      { status: 'fulfilled', value: await expected(a.id) },
    ]);
    expect(answers.slice(0, 3).map((r) => (r as PromiseFulfilledResult<{ email: string; phone?: string }>).value)).toMatchObject([{ email: a.email, phone: '0400 111 222' }, { email: b.email }, { email: a.email }]);
    for (const r of answers.slice(3)) expect(((r as PromiseRejectedResult).reason as DomainError).code).toBe('not_found');
  });
});
