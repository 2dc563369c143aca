import { Migration } from '@mikro-orm/migrations';

/** Customer accounts, their one-time tokens and the per-email failed-login counts. */
export class Migration20261121160000_customers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "identity"."customer_accounts" (
      "id" uuid primary key,
      "email" varchar(256) not null check ("email" = lower("email")),
      "password_hash" text null,
      "first_name" varchar(100) not null,
      "last_name" varchar(100) not null,
      "date_of_birth" date null,
      "phone" varchar(50) null,
      "address_line1" varchar(200) null,
      "address_line2" varchar(200) null,
      "city" varchar(100) null,
      "state" varchar(100) null,
      "post_code" varchar(20) null,
      "country" varchar(100) null,
      "email_verified" boolean not null default false,
      "terms_accepted_at" timestamptz null,
      "claimed_at" timestamptz null,
      "suspended_at" timestamptz null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create unique index "customer_accounts_email_unique" on "identity"."customer_accounts" ("email")`);
    this.addSql(`create table "identity"."customer_tokens" (
      "token_hash" char(64) primary key,
      "account_id" uuid not null references "identity"."customer_accounts" ("id") on delete cascade,
      "purpose" varchar(32) not null check ("purpose" in ('password_reset', 'email_verification')),
      "expires_at" timestamptz not null,
      "used_at" timestamptz null,
      "created_at" timestamptz not null)`);
    this.addSql(`create index "customer_tokens_account_index" on "identity"."customer_tokens" ("account_id", "purpose") where "used_at" is null`);
    this.addSql(`create index "customer_tokens_expires_index" on "identity"."customer_tokens" ("expires_at")`);
    this.addSql(`create table "identity"."customer_login_failures" (
      "email" varchar(256) primary key,
      "failed_count" integer not null,
      "locked_until" timestamptz null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create index "customer_login_failures_updated_index" on "identity"."customer_login_failures" ("updated_at")`);
  }
}
