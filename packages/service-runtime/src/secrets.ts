import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * AES-256-GCM envelope for secrets that must be recoverable (signing secrets, gateway
 * credentials), one per purpose. Sealed as `v2:<iv>:<tag>:<ciphertext>` (base64url) with a key
 * derived by HKDF-SHA256 from the configured encryption key and the purpose (e.g.
 * `identity/api-key-signing-secrets`), so one configured key never encrypts two kinds of
 * secret and two services' keys differ even when an operator configures the same value.
 * `v1` values (key = SHA-256 of the configured key, before purposes) are still opened.
 */
export class SecretBox {
  private readonly key: Buffer;
  private readonly legacyKey: Buffer;

  constructor(
    encryptionKey: string,
    private readonly purpose: string,
  ) {
    this.key = Buffer.from(hkdfSync('sha256', encryptionKey, 'billing-platform secret box', purpose, 32));
    this.legacyKey = createHash('sha256').update(encryptionKey).digest();
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v2', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join(':');
  }

  open(sealed: string): string {
    const [v, iv, tag, ct] = sealed.split(':');
    if ((v !== 'v1' && v !== 'v2') || !iv || !tag || ct === undefined) throw new Error('unrecognised sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', v === 'v2' ? this.key : this.legacyKey, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    try {
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      // GCM's "unable to authenticate data": said as what it almost always means to an operator.
      throw new SecretKeyMismatchError(this.purpose);
    }
  }
}

/** A sealed secret that the configured encryption key does not open: a configuration problem (the key changed or is mistyped) far more often than tampering. */
class SecretKeyMismatchError extends Error {
  constructor(readonly purpose: string) {
    super(
      `a stored secret (${purpose}) does not open with the configured encryption key: the key differs from the one it was sealed with (changed or mistyped), or the value was altered. Start with the key the data was written with.`,
    );
    this.name = 'SecretKeyMismatchError';
  }
}

/**
 * Runs `open`, which opens secrets sealed under the key configured in `variable` (at start-up:
 * the stored ones). When that key does not open them (changed or mistyped), the process stops as
 * at any invalid setting: "Invalid configuration" naming the variable, status 78, no stack trace
 * and never the key; `close` runs first (the database pool). Any other failure is rethrown.
 */
export async function openWithConfiguredKey<T>(variable: string, open: () => T | Promise<T>, close: () => Promise<void>): Promise<T> {
  try {
    return await open();
  } catch (e) {
    if (!(e instanceof SecretKeyMismatchError)) throw e;
    await close();
    process.stderr.write(`Invalid configuration:\n  ${variable}: ${e.message}\n`);
    process.exit(78);
  }
}

export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
