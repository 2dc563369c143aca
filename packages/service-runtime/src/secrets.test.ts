import { describe, expect, it } from 'vitest';
import { SecretBox } from './secrets.js';

describe('SecretBox', () => {
  it('opens what it sealed, and only with the key and purpose it was sealed with', () => {
    const box = new SecretBox('k'.repeat(40), 'identity/api-key-signing-secrets');
    const sealed = box.seal('whsec_abc');
    expect(box.open(sealed)).toBe('whsec_abc');
    expect(sealed).not.toContain('whsec_abc');
  });

  it('says a wrong key is a key that differs from the one the data was sealed with (it was GCM\'s "unable to authenticate data")', () => {
    const sealed = new SecretBox('k'.repeat(40), 'identity/token-keys').seal('secret');
    const other = new SecretBox('x'.repeat(40), 'identity/token-keys');
    expect(() => other.open(sealed)).toThrow(/identity\/token-keys.*does not open with the configured encryption key: the key differs/);
  });
});
