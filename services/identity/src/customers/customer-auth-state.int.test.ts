import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { openDatabase, sha256Hex } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import { MIGRATIONS } from '../migrations/index.js';
import { CustomerAccount } from './customer-account.js';
import { consumeToken, CustomerToken } from './customer-token.js';
import { LoginLockout } from '../passwords/login-lockout.js';
import { ResetEmailThrottle } from './reset-email-throttle.js';

// The lockout counter and the one-time tokens against a real Postgres database of their own,
// many statements at once on separate connections, as several identity replicas would run them.

const { orm } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'identity', entities: ENTITIES, poolMax: 20 }),
  schema: 'identity',
  migrations: MIGRATIONS,
});

const email = () => `${randomBytes(6).toString('hex')}@example.com`;

describe('LoginLockout', () => {
  const lockout = new LoginLockout('customer', { threshold: 5, lockSeconds: 900, maxLockSeconds: 86_400 });
  const C = '203.0.113.7';

  it('counts 20 concurrent failures exactly: the 5th locks, the 15 after it find the lock', async () => {
    const e = email();
    const results = await Promise.all(Array.from({ length: 20 }, () => lockout.recordFailure(orm().em.fork(), e, C)));
    expect(results.filter((s) => s === 0)).toHaveLength(5);
    expect(results.filter((s) => s > 0)).toHaveLength(15);
    const left = await lockout.secondsLocked(orm().em.fork(), e, C);
    expect(left).toBeGreaterThan(890);
    expect(left).toBeLessThanOrEqual(900);
  });

  it('is not locked by four failures, and a success clears them', async () => {
    const e = email();
    for (let i = 0; i < 4; i++) expect(await lockout.recordFailure(orm().em.fork(), e, C)).toBe(0);
    expect(await lockout.secondsLocked(orm().em.fork(), e, C)).toBe(0);
    expect(await lockout.recordSuccess(orm().em.fork(), e, C)).toBe(0);
    for (let i = 0; i < 4; i++) expect(await lockout.recordFailure(orm().em.fork(), e, C)).toBe(0);
    expect(await lockout.secondsLocked(orm().em.fork(), e, C)).toBe(0);
  });

  it('locks only the client that failed, and each further lock of that client is twice as long', async () => {
    const e = email();
    for (let i = 0; i < 5; i++) await lockout.recordFailure(orm().em.fork(), e, C);
    expect(await lockout.secondsLocked(orm().em.fork(), e, C)).toBeGreaterThan(890);
    expect(await lockout.secondsLocked(orm().em.fork(), e, '198.51.100.1')).toBe(0);
    expect(await lockout.recordSuccess(orm().em.fork(), e, '198.51.100.1')).toBe(0);
    // Let the first lock run out, then fail five times more: the second lock is 1800 s.
    await orm().em.fork().execute(`update login_failures set locked_until = now() - interval '1 second' where email = ?`, [e]);
    for (let i = 0; i < 5; i++) await lockout.recordFailure(orm().em.fork(), e, C);
    expect(await lockout.secondsLocked(orm().em.fork(), e, C)).toBeGreaterThan(1790);
  });

  it('does not let a success clear a running lock', async () => {
    const e = email();
    for (let i = 0; i < 5; i++) await lockout.recordFailure(orm().em.fork(), e, C);
    expect(await lockout.recordSuccess(orm().em.fork(), e, C)).toBeGreaterThan(0);
    expect(await lockout.secondsLocked(orm().em.fork(), e, C)).toBeGreaterThan(0);
  });

  it('keys an email in every letter case as one, stored lower-cased: failures add up, and a clear in any case ends the lock', async () => {
    const e = `Mixed.${randomBytes(6).toString('hex')}@Example.COM`;
    for (const typed of [e, e.toLowerCase(), e.toUpperCase(), e.toLowerCase(), e]) await lockout.recordFailure(orm().em.fork(), typed, C);
    for (const typed of [e, e.toLowerCase(), e.toUpperCase()]) expect(await lockout.secondsLocked(orm().em.fork(), typed, C)).toBeGreaterThan(890);
    expect(await orm().em.fork().execute(`select email from login_failures where lower(email) = lower(?)`, [e])).toEqual([{ email: e.toLowerCase() }]);
    await lockout.clear(orm().em.fork(), e);
    expect(await lockout.secondsLocked(orm().em.fork(), e.toUpperCase(), C)).toBe(0);
  });
});

describe('ResetEmailThrottle', () => {
  it('counts an address in every letter case as one', async () => {
    const throttle = new ResetEmailThrottle(3);
    const e = `Mixed.${randomBytes(6).toString('hex')}@Example.COM`;
    const admitted = [];
    for (const typed of [e, e.toLowerCase(), e.toUpperCase(), e]) admitted.push(await throttle.admit(orm().em.fork(), typed));
    expect(admitted).toEqual([true, true, true, false]);
  });
});

describe('customer account emails', () => {
  it('are stored as given and unique in any letter case (the unique index on lower(email))', async () => {
    const e = `Mixed.${randomBytes(6).toString('hex')}@Example.COM`;
    const account = CustomerAccount.unclaimed({ email: e, firstName: 'A', lastName: 'B' });
    await orm().em.fork().persistAndFlush(account);
    expect(await orm().em.fork().execute(`select email from customer_accounts where id = ?`, [account.id])).toEqual([{ email: e }]);
    const twin = CustomerAccount.unclaimed({ email: e.toLowerCase(), firstName: 'C', lastName: 'D' });
    await expect(orm().em.fork().persistAndFlush(twin)).rejects.toBeInstanceOf(UniqueConstraintViolationException);
  });
});

describe('customer one-time tokens', () => {
  it('are used exactly once under 10 concurrent uses', async () => {
    const em = orm().em.fork();
    const account = CustomerAccount.unclaimed({ email: email(), firstName: 'A', lastName: 'B' });
    await em.persistAndFlush(account);
    const { token, entity } = CustomerToken.mint(account.id, 'password_reset', 'email', 3600);
    await em.persistAndFlush(entity);

    const uses = await Promise.all(Array.from({ length: 10 }, () => orm().em.fork().transactional((tx) => consumeToken(tx, token, 'password_reset'))));
    expect(uses.filter((u) => u?.accountId === account.id)).toHaveLength(1);
    expect(uses.filter((u) => u === undefined)).toHaveLength(9);
  });

  it('are refused for the wrong purpose and once expired', async () => {
    const em = orm().em.fork();
    const account = CustomerAccount.unclaimed({ email: email(), firstName: 'A', lastName: 'B' });
    await em.persistAndFlush(account);
    const verification = CustomerToken.mint(account.id, 'email_verification', 'email', 3600);
    const expired = CustomerToken.mint(account.id, 'password_reset', 'email', 3600, new Date(Date.now() - 2 * 3600_000));
    await em.persistAndFlush([verification.entity, expired.entity]);
    expect(await consumeToken(orm().em.fork(), verification.token, 'password_reset')).toBeUndefined();
    expect(await consumeToken(orm().em.fork(), expired.token, 'password_reset')).toBeUndefined();
    expect(await consumeToken(orm().em.fork(), verification.token, 'email_verification')).toEqual({ accountId: account.id, delivery: 'email' });
  });

  it('report how they were delivered; a row written without it (a previous release) counts as handed out, which verifies nothing', async () => {
    const em = orm().em.fork();
    const account = CustomerAccount.unclaimed({ email: email(), firstName: 'A', lastName: 'B' });
    await em.persistAndFlush(account);
    const handedOut = CustomerToken.mint(account.id, 'password_reset', 'handed_out', 3600);
    await em.persistAndFlush(handedOut.entity);
    const legacy = randomBytes(32).toString('base64url');
    await orm().em.fork().execute(
      `insert into customer_tokens (token_hash, account_id, purpose, expires_at, created_at) values (?, ?, 'password_reset', now() + interval '1 hour', now())`,
      [sha256Hex(legacy), account.id],
    );
    expect(await consumeToken(orm().em.fork(), handedOut.token, 'password_reset')).toEqual({ accountId: account.id, delivery: 'handed_out' });
    expect(await consumeToken(orm().em.fork(), legacy, 'password_reset')).toEqual({ accountId: account.id, delivery: 'handed_out' });
  });
});
