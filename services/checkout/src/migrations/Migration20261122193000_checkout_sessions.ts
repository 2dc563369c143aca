import { Migration } from '@mikro-orm/migrations';

/**
 * Hosted checkout: links signed server-side, sessions (each holding the nonce of the link it
 * came from) and the bank tokens captured for them. The schema comes from the service's config.
 */
export class Migration20261122193000_checkout_sessions extends Migration {
  override async up(): Promise<void> {
    const schema = this.config.get('schema') ?? 'checkout';
    this.addSql(`create table "${schema}"."links" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "api_key_id" uuid not null,
      "plan_id" uuid not null,
      "nonce" varchar(128) not null,
      "return_url" text not null,
      "expires_at" timestamptz not null,
      "created_at" timestamptz not null)`);
    this.addSql(`create index "links_merchant_index" on "${schema}"."links" ("merchant_id", "created_at")`);
    this.addSql(`create table "${schema}"."sessions" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "api_key_id" uuid not null,
      "plan_id" uuid not null,
      "nonce" varchar(128) not null,
      "link_hash" char(64) not null,
      "return_url" text not null,
      "email" varchar(256) null,
      "first_name" varchar(100) null,
      "last_name" varchar(100) null,
      "phone" varchar(50) null,
      "status" varchar(16) not null check ("status" in ('Open','Completed')),
      "completion_lease_until" timestamptz null,
      "subscription_id" uuid not null,
      "customer_account_id" uuid null,
      "member_id" uuid null,
      "payment_method_id" uuid null,
      "completed_at" timestamptz null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    // The nonce record: a nonce is used once per merchant, by the link (hash) that first used it.
    this.addSql(`create unique index "sessions_nonce_unique" on "${schema}"."sessions" ("merchant_id", "nonce")`);
    this.addSql(`create table "${schema}"."bank_tokens" (
      "token" varchar(128) primary key,
      "session_id" uuid not null references "${schema}"."sessions" ("id") on delete cascade,
      "merchant_id" uuid not null,
      "account_name" varchar(200) not null,
      "bsb" varchar(10) not null,
      "last4" char(4) not null,
      "created_at" timestamptz not null)`);
    this.addSql(`create index "bank_tokens_session_index" on "${schema}"."bank_tokens" ("session_id")`);
  }
}
