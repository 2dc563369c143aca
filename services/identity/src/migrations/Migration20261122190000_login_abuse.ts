import { Migration } from '@mikro-orm/migrations';

/**
 * Failed-login locks keyed by kind (customer, merchant user), email and client instead of email
 * alone, with a count of locks for their growing length; and the per-email count of
 * password-reset emails sent in the current hour. Unqualified names: the connection's
 * search_path is the service's schema. Running locks are not carried over (they were per email).
 */
export class Migration20261122190000_login_abuse extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop table if exists customer_login_failures`);
    this.addSql(`create table login_failures (
      kind varchar(32) not null,
      email varchar(256) not null,
      client varchar(64) not null,
      failed_count integer not null,
      lock_count integer not null default 0,
      locked_until timestamptz null,
      updated_at timestamptz not null,
      primary key (kind, email, client))`);
    this.addSql(`create index login_failures_email_index on login_failures (kind, email)`);
    this.addSql(`create index login_failures_updated_index on login_failures (updated_at)`);
    this.addSql(`create table password_reset_sends (
      email varchar(256) primary key,
      window_started_at timestamptz not null,
      sent_count integer not null)`);
  }
}
