import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const scrypt = (password: string, salt: Buffer, keylen: number, opts: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) => scryptCb(password, salt, keylen, opts, (e, key) => (e ? reject(e) : resolve(key))));

/** OWASP's scrypt recommendation: N=2^17, r=8, p=1. */
export const OWASP_SCRYPT = { N: 2 ** 17, r: 8, p: 1 } as const;

export interface ScryptCost {
  N: number;
  r: number;
  p: number;
}

/**
 * scrypt password hashes in the self-describing form `scrypt$N$r$p$salt$hash` (base64url), so
 * the cost can be raised later without invalidating existing hashes.
 */
export class PasswordHasher {
  private dummyHash?: Promise<string>;

  constructor(private readonly cost: ScryptCost = OWASP_SCRYPT) {}

  async hash(password: string): Promise<string> {
    const salt = randomBytes(16);
    const key = await scrypt(password, salt, 32, this.options(this.cost));
    const { N, r, p } = this.cost;
    return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
  }

  async verify(password: string, stored: string): Promise<boolean> {
    const [alg, n, r, p, salt, hash] = stored.split('$');
    if (alg !== 'scrypt' || !salt || !hash) return false;
    const cost = { N: Number(n), r: Number(r), p: Number(p) };
    const expected = Buffer.from(hash, 'base64url');
    const actual = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, this.options(cost));
    return timingSafeEqual(actual, expected);
  }

  /**
   * Spends the same time as a real verification when there is no account, so response timing
   * does not reveal whether an email is registered.
   */
  async verifyAgainstNothing(password: string): Promise<false> {
    this.dummyHash ??= this.hash('not-a-real-password');
    await this.verify(password, await this.dummyHash);
    return false;
  }

  private options(c: ScryptCost): ScryptOptions {
    return { N: c.N, r: c.r, p: c.p, maxmem: 256 * c.N * c.r + 1024 * 1024 };
  }
}
