import { Migration } from '@mikro-orm/migrations';

/**
 * Customer accounts keep their email exactly as sent (it was lower-cased, with a check that said
 * so) and stay unique case-insensitively, on a unique index on `lower(email)`: the one lookups by
 * email use (merchant users already had one). Rows stored until now are all lower-case (the check
 * held them), so the index builds on them unchanged and nothing is rewritten.
 *
 * Expand step of a rolling deploy: the unique index on `email` itself stays, because replicas of
 * the previous release, still running during the rollout, insert with `on conflict (email)`, which
 * needs it. It is redundant beside `lower(email)` and is dropped by a later release, once no such
 * replica is left; this release's code names no conflict target, so it needs neither change.
 * Unqualified names: the connection's search_path is the service's schema.
 */
export class Migration20261127000000_customer_email_as_sent extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table customer_accounts drop constraint customer_accounts_email_check`);
    this.addSql(`create unique index customer_accounts_email_lower_unique on customer_accounts (lower(email))`);
  }
}
