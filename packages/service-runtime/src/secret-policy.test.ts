import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEV_ENCRYPTION_KEY, secretProblem } from './config.js';

describe('production secrets', () => {
  it.each([
    ['missing', undefined, 'is required'],
    ['the development key', DEV_ENCRYPTION_KEY, 'published development value'],
    ['24 random bytes', randomBytes(24).toString('base64'), 'encodes 24 bytes'],
    ['a sentence', 'this is my very long and very secret passphrase!!', 'hex or base64'],
    ['one repeated character', 'a'.repeat(64), 'does not look random'],
    ['a repeated word', 'password'.repeat(6), 'does not look random'],
    // Each passed the entropy measure alone (probe): a repeated hex run, an alphabet, a passphrase.
    ['the hex digits four times', '0123456789abcdef'.repeat(4), 'repeats itself'],
    ['the base64 alphabet', 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', 'consecutive characters'],
    ['the alphabet twice', 'abcdefghijklmnopqrstuvwxyz'.repeat(2), 'does not look random'],
    ['a camel-case passphrase', 'ThisIsMyVerySecretProductionKeyForBillingAdmin2026', 'reads as words'],
    ['another passphrase', 'SuperSecretAdminTokenForTheBillingPlatform2026', 'reads as words'],
  ])('refuses %s', (_what, value, problem) => {
    expect(secretProblem(value)).toContain(problem);
  });

  it.each([
    ['base64', randomBytes(32).toString('base64')],
    ['base64url', randomBytes(32).toString('base64url')],
    ['hex', randomBytes(32).toString('hex')],
  ])('accepts 32 random bytes as %s', (_what, value) => {
    expect(secretProblem(value)).toBeUndefined();
  });

  it('accepts every one of 20,000 random values (no false refusal)', () => {
    const refused = [];
    for (let i = 0; i < 20_000; i++) {
      const b = randomBytes(32);
      for (const v of [b.toString('base64'), b.toString('base64url'), b.toString('hex')]) if (secretProblem(v)) refused.push(v);
    }
    expect(refused).toEqual([]);
  });
});
