import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000600_subscriptions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."subscriptions" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "member_id" uuid not null references "billing"."members" ("id"),
      "plan_id" uuid not null references "billing"."plans" ("id"),
      "payment_method_id" uuid null references "billing"."payment_methods" ("id") on delete set null,
      "status" varchar(16) not null check ("status" in ('Active','Paused','PastDue','Cancelled')),
      "current_period_start" timestamptz not null,
      "current_period_end" timestamptz not null,
      "next_billing_at" timestamptz null,
      "billing_anchor" timestamptz not null,
      "cancel_at_period_end" boolean not null default false,
      "paused_at" timestamptz null,
      "resume_at" timestamptz null,
      "cancelled_at" timestamptz null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    // At most one live (not Cancelled) subscription per member and plan, even under concurrent creates.
    this.addSql(`create unique index "subscriptions_live_unique" on "billing"."subscriptions" ("member_id", "plan_id") where "status" <> 'Cancelled'`);
    this.addSql(`create index "subscriptions_merchant_index" on "billing"."subscriptions" ("merchant_id", "created_at", "id")`);
    this.addSql(`create index "subscriptions_due_index" on "billing"."subscriptions" ("next_billing_at") where "status" in ('Active','PastDue')`);
  }
}
