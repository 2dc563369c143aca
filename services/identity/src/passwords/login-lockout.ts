import type { EntityManager } from '@mikro-orm/postgresql';
import { emailKey } from '../email-match.js';

export type LoginKind = 'customer' | 'merchant_user';

export interface LockoutPolicy {
  /** Consecutive failures from one client for one email that lock them; 0 turns locking off. */
  threshold: number;
  /** How long the first lock lasts; each further lock of the same email and client lasts twice the one before. */
  lockSeconds: number;
  /** Upper bound of a lock's length. */
  maxLockSeconds: number;
}

/**
 * Consecutive failed logins per kind, email and client (the client IP the gateway saw), whether
 * or not the email has an account (so a lock does not reveal which emails are registered). The
 * `threshold`-th consecutive failure locks the email for that client and starts the count again;
 * each further lock of the same pair is twice as long (up to `maxLockSeconds`); a success clears
 * the pair. Keyed by client so that a stranger failing on someone's email locks only
 * themselves: the owner, from their own client, can still sign in. Guessing one email from many
 * clients is bounded by the gateway's per-account limit on password endpoints.
 *
 * Every change is one atomic statement against the database clock, so concurrent failures at any
 * number of replicas are all counted. An email in any letter case is one key (`emailKey`).
 */
export class LoginLockout {
  constructor(
    private readonly kind: LoginKind,
    private readonly policy: LockoutPolicy,
  ) {}

  /** Seconds until the lock of `email` for `client` ends (at least 1), or 0 when it is not locked. */
  async secondsLocked(em: EntityManager, email: string, client: string): Promise<number> {
    if (this.policy.threshold <= 0) return 0;
    const rows = await em.execute<{ seconds: number }[]>(
      `select ceil(extract(epoch from locked_until - now()))::int as seconds
         from login_failures where kind = ? and email = ? and client = ? and locked_until > now()`,
      [this.kind, emailKey(email), client],
    );
    return rows.length ? Math.max(1, Number(rows[0]!.seconds)) : 0;
  }

  /**
   * Counts a failure. Returns the seconds the pair is now locked for when it already was (a
   * concurrent failure locked it), else 0 — the failure that reaches the threshold itself is
   * still answered as a plain failure.
   */
  async recordFailure(em: EntityManager, email: string, client: string): Promise<number> {
    const { threshold, lockSeconds, maxLockSeconds } = this.policy;
    if (threshold <= 0) return 0;
    // Upsert-and-decide in one statement: concurrent failures cannot both read the old count.
    const rows = await em.execute<{ failed_count: number }[]>(
      `insert into login_failures as f (kind, email, client, failed_count, lock_count, locked_until, updated_at)
       values (?, ?, ?, case when 1 >= ?::int then 0 else 1 end, case when 1 >= ?::int then 1 else 0 end,
               case when 1 >= ?::int then now() + ?::int * interval '1 second' end, now())
       on conflict (kind, email, client) do update set
         failed_count = case when f.failed_count + 1 >= ?::int then 0 else f.failed_count + 1 end,
         lock_count = case when f.failed_count + 1 >= ?::int then f.lock_count + 1 else f.lock_count end,
         locked_until = case when f.failed_count + 1 >= ?::int
           then now() + least(?::int, ?::int * power(2, least(f.lock_count, 30))) * interval '1 second'
           else f.locked_until end,
         updated_at = now()
       where f.locked_until is null or f.locked_until <= now()
       returning f.failed_count`,
      [this.kind, emailKey(email), client, threshold, threshold, threshold, lockSeconds, threshold, threshold, threshold, maxLockSeconds, lockSeconds],
    );
    return rows.length ? 0 : this.secondsLocked(em, email, client);
  }

  /**
   * Clears the pair after a correct password, unless it is locked: returns the seconds left in
   * that case (a lock set by failures that raced this login still holds).
   */
  async recordSuccess(em: EntityManager, email: string, client: string): Promise<number> {
    if (this.policy.threshold <= 0) return 0;
    const rows = await em.execute<{ seconds: number | null }[]>(
      `with cleared as (
         delete from login_failures where kind = ? and email = ? and client = ? and (locked_until is null or locked_until <= now()) returning 1
       )
       select ceil(extract(epoch from locked_until - now()))::int as seconds
         from login_failures where kind = ? and email = ? and client = ? and locked_until > now()`,
      [this.kind, emailKey(email), client, this.kind, emailKey(email), client],
    );
    return rows.length ? Math.max(1, Number(rows[0]!.seconds)) : 0;
  }

  /** Forgets every client's failures and locks of `email` (after a password reset, which proves control of the email). */
  async clear(em: EntityManager, email: string): Promise<void> {
    await em.execute(`delete from login_failures where kind = ? and email = ?`, [this.kind, emailKey(email)]);
  }
}
