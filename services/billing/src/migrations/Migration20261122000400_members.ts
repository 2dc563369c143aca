import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000400_members extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."members" (
      "id" uuid primary key,
      "merchant_id" uuid not null references "billing"."merchants" ("id"),
      "email" varchar(256) not null,
      "first_name" varchar(100) not null,
      "last_name" varchar(100) not null,
      "phone" varchar(50) null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    // One member per merchant and email, compared case-insensitively; concurrent creates race here.
    this.addSql(`create unique index "members_merchant_email_unique" on "billing"."members" ("merchant_id", lower("email"))`);
    this.addSql(`create index "members_merchant_index" on "billing"."members" ("merchant_id", "created_at", "id")`);
  }
}
