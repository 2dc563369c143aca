import { Migration } from '@mikro-orm/migrations';
import { outboxTableSql } from '@billing/service-runtime';

/** Invitations, their onboarding wizards, and the checkout service's outbox. */
export class Migration20261122190000_invitations extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    for (const sql of outboxTableSql(s)) this.addSql(sql);
    this.addSql(`create table "${s}"."invitations" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "token_hash" char(64) not null,
      "first_name" varchar(100) not null,
      "last_name" varchar(100) not null,
      "email" varchar(256) null,
      "phone" varchar(50) null,
      "expires_at" timestamptz not null,
      "created_at" timestamptz not null,
      "account_id" uuid null,
      "accepted_at" timestamptz null,
      "completed_at" timestamptz null,
      "revoked_at" timestamptz null,
      "member_id" uuid null,
      "subscription_id" uuid null)`);
    this.addSql(`create unique index "invitations_token_hash_unique" on "${s}"."invitations" ("token_hash")`);
    this.addSql(`create index "invitations_merchant_index" on "${s}"."invitations" ("merchant_id", "created_at" desc, "id")`);
    this.addSql(`create table "${s}"."onboardings" (
      "invitation_id" uuid primary key references "${s}"."invitations" ("id"),
      "account_id" uuid not null,
      "details" jsonb null,
      "payment_method" jsonb null,
      "plan_id" uuid null,
      "product_id" uuid null,
      "answers" jsonb null,
      "completion_started_at" timestamptz null,
      "member_id" uuid null,
      "payment_method_id" uuid null,
      "subscription_id" uuid null,
      "completed_at" timestamptz null,
      "updated_at" timestamptz not null)`);
  }
}
