import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000300_plans extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."plans" (
      "id" uuid primary key,
      "merchant_id" uuid not null references "billing"."merchants" ("id"),
      "product_id" uuid not null references "billing"."products" ("id"),
      "name" varchar(200) not null,
      "amount_minor" bigint not null check ("amount_minor" > 0),
      "currency" char(3) not null,
      "billing_interval" varchar(16) not null check ("billing_interval" in ('Week','Fortnight','Month','Year')),
      "interval_count" int not null default 1 check ("interval_count" between 1 and 52),
      "trial_days" int not null default 0 check ("trial_days" between 0 and 365),
      "is_active" boolean not null default true,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create index "plans_merchant_index" on "billing"."plans" ("merchant_id", "created_at", "id")`);
  }
}
