import { describe, expect, it } from 'vitest';
import { PasswordHasher } from './password-hasher.js';

describe('PasswordHasher', () => {
  const hasher = new PasswordHasher({ N: 2 ** 10, r: 8, p: 1 });

  it('verifies the password it hashed and refuses another', async () => {
    const stored = await hasher.hash('correct horse battery');
    expect(stored).toMatch(/^scrypt\$1024\$8\$1\$/);
    await expect(hasher.verify('correct horse battery', stored)).resolves.toBe(true);
    await expect(hasher.verify('correct horse batterY', stored)).resolves.toBe(false);
  });

  it('salts each hash', async () => {
    expect(await hasher.hash('same')).not.toEqual(await hasher.hash('same'));
  });

  it('verifies hashes made at another cost (cost is read from the hash)', async () => {
    const stronger = new PasswordHasher({ N: 2 ** 11, r: 8, p: 1 });
    const stored = await stronger.hash('pw-12345678');
    await expect(hasher.verify('pw-12345678', stored)).resolves.toBe(true);
  });

  it('treats a malformed stored hash as a mismatch', async () => {
    await expect(hasher.verify('x', 'bcrypt$whatever')).resolves.toBe(false);
  });
});
