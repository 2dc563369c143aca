import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '@billing/service-runtime';

/**
 * Deletes customer sign-in state nobody can use any more: failure counts idle for a day (with
 * no lock running) and one-time tokens expired for a day. Failures are counted for unknown
 * emails too, so without this the table would grow with every guessed address.
 */
export async function pruneCustomerAuthState(orm: MikroORM): Promise<void> {
  const em = orm.em.fork();
  await em.execute(`delete from login_failures where updated_at < now() - interval '1 day' and (locked_until is null or locked_until < now())`);
  await em.execute(`delete from password_reset_sends where window_started_at < now() - interval '1 hour'`);
  await em.execute(`delete from customer_tokens where expires_at < now() - interval '1 day'`);
}

/** Runs `pruneCustomerAuthState` every `intervalMs`; returns a stop function. */
export function startCustomerHousekeeping(orm: MikroORM, logger: Logger, intervalMs = 3_600_000): () => void {
  const timer = setInterval(() => void pruneCustomerAuthState(orm).catch((e) => logger.warn({ err: e }, 'customer housekeeping failed')), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
