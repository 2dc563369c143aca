import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000500_payment_methods extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."payment_methods" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "member_id" uuid not null references "billing"."members" ("id"),
      "type" varchar(16) not null check ("type" in ('Card','BankAccount')),
      "brand" varchar(50) null,
      "last4" char(4) not null check ("last4" ~ '^[0-9]{4}$'),
      "expiry_month" smallint null check ("expiry_month" between 1 and 12),
      "expiry_year" smallint null,
      "account_name" varchar(200) null,
      "bsb" varchar(7) null,
      "provider_token" varchar(200) null,
      "rank" int not null check ("rank" >= 1),
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null,
      -- Deferred so a reorder can swap ranks inside one transaction.
      constraint "payment_methods_member_rank_unique" unique ("member_id", "rank") deferrable initially deferred)`);
    this.addSql(`create unique index "payment_methods_provider_token_unique" on "billing"."payment_methods" ("merchant_id", "provider_token") where "provider_token" is not null`);
  }
}
