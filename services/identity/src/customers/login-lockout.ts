import type { EntityManager } from '@mikro-orm/postgresql';

export interface LockoutPolicy {
  /** Consecutive failures that lock an email. */
  threshold: number;
  /** How long the lock lasts. */
  lockSeconds: number;
}

/**
 * Consecutive failed customer logins, per email, whether or not the email has an account (so
 * the lock does not reveal which emails are registered). The `threshold`-th consecutive failure
 * locks the email for `lockSeconds` and starts the count again; a success clears it. Every
 * change is one atomic statement against the database clock, so concurrent failures at any
 * number of replicas are all counted.
 */
export class LoginLockout {
  constructor(private readonly policy: LockoutPolicy) {}

  /** Seconds until the email's lock ends (at least 1), or 0 when it is not locked. */
  async secondsLocked(em: EntityManager, email: string): Promise<number> {
    const rows = await em.execute<{ seconds: number }[]>(
      `select ceil(extract(epoch from locked_until - now()))::int as seconds
         from customer_login_failures where email = ? and locked_until > now()`,
      [email],
    );
    return rows.length ? Math.max(1, Number(rows[0]!.seconds)) : 0;
  }

  /**
   * Counts a failure. Returns the seconds the email is now locked for when it already was (a
   * concurrent failure locked it), else 0 — the failure that reaches the threshold itself is
   * still answered as a plain failure.
   */
  async recordFailure(em: EntityManager, email: string): Promise<number> {
    const { threshold, lockSeconds } = this.policy;
    const rows = await em.execute<{ failed_count: number }[]>(
      `insert into customer_login_failures as f (email, failed_count, locked_until, updated_at)
       values (?, case when 1 >= ?::int then 0 else 1 end, case when 1 >= ?::int then now() + ?::int * interval '1 second' end, now())
       on conflict (email) do update set
         failed_count = case when f.failed_count + 1 >= ?::int then 0 else f.failed_count + 1 end,
         locked_until = case when f.failed_count + 1 >= ?::int then now() + ?::int * interval '1 second' else f.locked_until end,
         updated_at = now()
       where f.locked_until is null or f.locked_until <= now()
       returning f.failed_count`,
      [email, threshold, threshold, lockSeconds, threshold, threshold, lockSeconds],
    );
    return rows.length ? 0 : this.secondsLocked(em, email);
  }

  /**
   * Clears the count after a correct password, unless the email is locked: returns the seconds
   * left in that case (a lock set by failures that raced this login still holds).
   */
  async recordSuccess(em: EntityManager, email: string): Promise<number> {
    const rows = await em.execute<{ seconds: number | null }[]>(
      `with cleared as (
         delete from customer_login_failures where email = ? and (locked_until is null or locked_until <= now()) returning 1
       )
       select ceil(extract(epoch from locked_until - now()))::int as seconds
         from customer_login_failures where email = ? and locked_until > now()`,
      [email, email],
    );
    return rows.length ? Math.max(1, Number(rows[0]!.seconds)) : 0;
  }

  /** Forgets the email's failures and lock (after a successful password reset, which proves control of the email). */
  async clear(em: EntityManager, email: string): Promise<void> {
    await em.execute(`delete from customer_login_failures where email = ?`, [email]);
  }
}
