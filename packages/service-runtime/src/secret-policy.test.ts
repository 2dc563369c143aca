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
});
