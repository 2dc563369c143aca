import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000200_questions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."questions" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "product_id" uuid not null references "billing"."products" ("id"),
      "text" text not null check (length("text") between 1 and 1000),
      "kind" varchar(16) not null check ("kind" in ('Text','SingleChoice','MultiChoice')),
      "required" boolean not null default false,
      "display_order" int not null,
      "options" jsonb not null default '[]',
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create index "questions_product_order_index" on "billing"."questions" ("product_id", "display_order", "id")`);
  }
}
