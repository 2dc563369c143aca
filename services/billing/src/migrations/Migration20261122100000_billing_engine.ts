import { Migration } from '@mikro-orm/migrations';

/** Transactions, billing-run state on subscriptions, platform fees and fee statements. */
export class Migration20261122100000_billing_engine extends Migration {
  override async up(): Promise<void> {
    // Platform fee terms per merchant: a percentage (exact decimal) plus a fixed amount in minor units.
    this.addSql(`alter table "billing"."merchants"
      add column "platform_fee_percent" numeric(7,4) not null default 1.5 check ("platform_fee_percent" >= 0 and "platform_fee_percent" <= 100),
      add column "platform_fee_fixed_minor" bigint not null default 30 check ("platform_fee_fixed_minor" >= 0)`);

    // Dunning state: the period being collected while PastDue, when the first failure happened,
    // how many retries ran; and the lease a billing run holds while it charges the subscription.
    this.addSql(`alter table "billing"."subscriptions"
      add column "dunning_period_start" timestamptz null,
      add column "dunning_started_at" timestamptz null,
      add column "retry_count" int not null default 0,
      add column "claimed_until" timestamptz null`);

    this.addSql(`create table "billing"."transactions" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "member_id" uuid not null,
      "subscription_id" uuid null references "billing"."subscriptions" ("id"),
      "payment_method_id" uuid null references "billing"."payment_methods" ("id") on delete set null,
      "kind" varchar(8) not null check ("kind" in ('Charge','Refund')),
      "amount_minor" bigint not null check ("amount_minor" > 0),
      "currency" char(3) not null,
      "status" varchar(16) not null check ("status" in ('Processing','Settled','Failed')),
      "failure_reason" varchar(200) null,
      "attempt" int not null default 1,
      "original_transaction_id" uuid null references "billing"."transactions" ("id"),
      "period_start" timestamptz null,
      "fee_minor" bigint not null default 0,
      "refunded_minor" bigint not null default 0,
      "reason" varchar(500) null,
      "provider_ref" varchar(200) null,
      "claimed_until" timestamptz null,
      "occurred_at" timestamptz not null,
      "settled_at" timestamptz null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null,
      constraint "transactions_refund_within_charge" check ("refunded_minor" >= 0 and "refunded_minor" <= "amount_minor"))`);
    // One billing-run charge per subscription period, attempt and payment method: a second
    // replica claiming the same due period cannot insert a second charge.
    this.addSql(`create unique index "transactions_period_unique" on "billing"."transactions" ("subscription_id", "period_start", "attempt", "payment_method_id") where "kind" = 'Charge' and "original_transaction_id" is null`);
    this.addSql(`create index "transactions_merchant_index" on "billing"."transactions" ("merchant_id", "occurred_at", "id")`);
    this.addSql(`create index "transactions_subscription_index" on "billing"."transactions" ("subscription_id", "occurred_at")`);
    this.addSql(`create index "transactions_original_index" on "billing"."transactions" ("original_transaction_id") where "original_transaction_id" is not null`);
    // Calls not yet confirmed by the provider (reconciled by the next run) and bank charges awaiting settlement.
    this.addSql(`create index "transactions_unconfirmed_index" on "billing"."transactions" ("claimed_until") where "status" = 'Processing' and "provider_ref" is null`);
    this.addSql(`create index "transactions_settling_index" on "billing"."transactions" ("occurred_at") where "status" = 'Processing' and "provider_ref" is not null`);

    this.addSql(`create table "billing"."fee_statements" (
      "id" uuid primary key,
      "merchant_id" uuid not null references "billing"."merchants" ("id"),
      "reference" varchar(40) not null unique,
      "period_start" timestamptz not null,
      "period_end" timestamptz not null,
      "status" varchar(16) not null check ("status" in ('Draft','Finalised','Paid')),
      "currency" char(3) not null,
      "total_fees_minor" bigint not null default 0,
      "total_net_minor" bigint not null default 0,
      "transaction_count" int not null default 0,
      "finalised_at" timestamptz null,
      "paid_at" timestamptz null,
      "payment_reference" varchar(200) null,
      "notes" varchar(2000) null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null,
      check ("period_end" > "period_start"))`);
    this.addSql(`create index "fee_statements_merchant_index" on "billing"."fee_statements" ("merchant_id", "created_at", "id")`);
    this.addSql(`create table "billing"."fee_statement_lines" (
      "statement_id" uuid not null references "billing"."fee_statements" ("id") on delete cascade,
      "transaction_id" uuid not null,
      "occurred_at" timestamptz not null,
      "description" varchar(500) not null,
      "reference" varchar(200) not null,
      "status" varchar(16) not null,
      "amount_minor" bigint not null,
      "fee_minor" bigint not null,
      "net_minor" bigint not null,
      primary key ("statement_id", "transaction_id"))`);
    this.addSql(`create index "fee_statement_lines_order_index" on "billing"."fee_statement_lines" ("statement_id", "occurred_at", "transaction_id")`);
  }
}
