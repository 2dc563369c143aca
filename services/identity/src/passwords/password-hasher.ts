import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { DomainError } from '@billing/contracts';

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
 *
 * At most `maxConcurrent` hashes run at once (0: no bound). Each costs 128 MiB and a core for a
 * good fraction of a second, so a queue would only make every caller wait seconds; a hash
 * beyond the bound is refused at once with `service_unavailable` (503, Retry-After: 1) instead.
 */
export class PasswordHasher {
  private dummyHash?: Promise<string>;
  private running = 0;

  constructor(
    private readonly cost: ScryptCost = OWASP_SCRYPT,
    private readonly maxConcurrent = 0,
  ) {}

  private async bounded<T>(work: () => Promise<T>): Promise<T> {
    if (this.maxConcurrent > 0 && this.running >= this.maxConcurrent) {
      throw new DomainError('service_unavailable', 'Too many password checks in progress; retry shortly.', { retryAfterSeconds: 1 });
    }
    this.running++;
    try {
      return await work();
    } finally {
      this.running--;
    }
  }

  async hash(password: string): Promise<string> {
    return this.bounded(() => this.hashNow(password));
  }

  private async hashNow(password: string): Promise<string> {
    const salt = randomBytes(16);
    const key = await scrypt(password, salt, 32, this.options(this.cost));
    const { N, r, p } = this.cost;
    return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
  }

  async verify(password: string, stored: string): Promise<boolean> {
    return this.bounded(() => this.verifyNow(password, stored));
  }

  private async verifyNow(password: string, stored: string): Promise<boolean> {
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
    // The dummy hash is made once, outside the bound: it must not fail the request that needs it.
    this.dummyHash ??= this.hashNow('not-a-real-password');
    await this.verify(password, await this.dummyHash);
    return false;
  }

  private options(c: ScryptCost): ScryptOptions {
    return { N: c.N, r: c.r, p: c.p, maxmem: 256 * c.N * c.r + 1024 * 1024 };
  }
}
