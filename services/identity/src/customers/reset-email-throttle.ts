import type { EntityManager } from '@mikro-orm/postgresql';
import { emailKey } from '../email-match.js';

/**
 * At most `perHour` password-reset emails per email address in each hour (a fixed window that
 * starts with the first email), so forgot-password cannot flood a mailbox. Shared by every
 * identity replica through one atomic statement. An address in any letter case is one count.
 */
export class ResetEmailThrottle {
  constructor(private readonly perHour: number) {}

  /** Counts one email to `email` and says whether it may be sent. */
  async admit(em: EntityManager, email: string): Promise<boolean> {
    if (this.perHour <= 0) return true;
    // Upsert-and-count in one statement: concurrent requests cannot both read the old count.
    const rows = await em.execute<{ sent_count: number }[]>(
      `insert into password_reset_sends as s (email, window_started_at, sent_count) values (?, now(), 1)
       on conflict (email) do update set
         window_started_at = case when s.window_started_at <= now() - interval '1 hour' then now() else s.window_started_at end,
         sent_count = case when s.window_started_at <= now() - interval '1 hour' then 1 else s.sent_count + 1 end
       returning s.sent_count`,
      [emailKey(email)],
    );
    return Number(rows[0]!.sent_count) <= this.perHour;
  }
}
