import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000100_products extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."products" (
      "id" uuid primary key,
      "merchant_id" uuid not null references "billing"."merchants" ("id"),
      "name" varchar(200) not null,
      "description" text null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create index "products_merchant_index" on "billing"."products" ("merchant_id", "created_at", "id")`);
  }
}
