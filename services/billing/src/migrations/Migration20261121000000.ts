import { Migration } from '@mikro-orm/migrations';
import { outboxTableSql } from '@billing/service-runtime';

export class Migration20261121000000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "billing"."merchants" (
      "id" uuid primary key,
      "name" varchar(200) not null,
      "description" text null,
      "contact_email" varchar(256) not null,
      "contact_phone" varchar(50) null,
      "country" char(2) null,
      "time_zone" varchar(64) null,
      "is_active" boolean not null default true,
      "provider_environment" varchar(16) not null default 'Staging' check ("provider_environment" in ('Staging','Production')),
      "provider_credentials_sealed" text null,
      "gateway_configured" boolean not null default false,
      "merchant_guid_configured" boolean not null default false,
      "provider_merchant_profile_id" varchar(64) null,
      "billing_retry_offsets_days" varchar(64) not null default '1,3,7',
      "billing_terminal_action" varchar(16) not null default 'Cancel' check ("billing_terminal_action" in ('Cancel','Pause')),
      "bank_settlement_window_days" int not null default 3,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create index "merchants_created_at_index" on "billing"."merchants" ("created_at", "id")`);
    for (const sql of outboxTableSql('billing')) this.addSql(sql);
  }
}
