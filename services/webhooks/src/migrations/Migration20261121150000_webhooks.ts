import { Migration } from '@mikro-orm/migrations';

/** Endpoints read model, event inbox, deliveries, attempts and queued manual replays. */
export class Migration20261121150000_webhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "webhooks"."endpoints" (
      "api_key_id" uuid primary key,
      "merchant_id" uuid not null,
      "url" text null,
      "event_types" jsonb null,
      "enabled" boolean not null,
      "revoked" boolean not null,
      "version" int not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create index "endpoints_merchant_id_index" on "webhooks"."endpoints" ("merchant_id")`);

    this.addSql(`create table "webhooks"."events" (
      "id" uuid primary key,
      "type" varchar(100) not null,
      "merchant_id" uuid not null,
      "occurred_at" timestamptz not null,
      "body" text null,
      "received_at" timestamptz not null default now())`);
    this.addSql(`create index "events_received_at_index" on "webhooks"."events" ("received_at")`);

    this.addSql(`create table "webhooks"."deliveries" (
      "id" uuid primary key,
      "event_id" uuid not null references "webhooks"."events" ("id") on delete cascade,
      "event_type" varchar(100) not null,
      "merchant_id" uuid not null,
      "api_key_id" uuid not null,
      "url" text not null,
      "status" varchar(16) not null check ("status" in ('Pending', 'Succeeded', 'Failed')),
      "scheduled_attempts" int not null default 0,
      "next_attempt_at" timestamptz null,
      "lease_until" timestamptz null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null,
      constraint "deliveries_event_api_key_unique" unique ("event_id", "api_key_id"))`);
    this.addSql(`create index "deliveries_due_index" on "webhooks"."deliveries" ("api_key_id", "next_attempt_at") where "status" = 'Pending'`);
    this.addSql(`create index "deliveries_merchant_created_index" on "webhooks"."deliveries" ("merchant_id", "created_at" desc, "id")`);
    this.addSql(`create index "deliveries_created_index" on "webhooks"."deliveries" ("created_at" desc, "id")`);
    this.addSql(`create index "deliveries_finished_index" on "webhooks"."deliveries" ("updated_at") where "status" <> 'Pending'`);

    this.addSql(`create table "webhooks"."attempts" (
      "id" uuid primary key,
      "delivery_id" uuid not null references "webhooks"."deliveries" ("id") on delete cascade,
      "attempted_at" timestamptz not null,
      "trigger" varchar(16) not null check ("trigger" in ('Scheduled', 'Manual')),
      "status_code" int null,
      "duration_ms" int not null,
      "error" text null,
      "response_body" text null)`);
    this.addSql(`create index "attempts_delivery_id_index" on "webhooks"."attempts" ("delivery_id", "attempted_at")`);

    this.addSql(`create table "webhooks"."replays" (
      "id" uuid primary key,
      "delivery_id" uuid not null references "webhooks"."deliveries" ("id") on delete cascade,
      "requested_at" timestamptz not null,
      "lease_until" timestamptz null)`);
    this.addSql(`create index "replays_requested_at_index" on "webhooks"."replays" ("requested_at")`);
  }
}
