import { Migration } from '@mikro-orm/migrations';

/**
 * Idempotency-Key records (interface.md "Idempotency-Key rules", contract.md §3). One row per
 * (scope, key); the primary key is what makes the first claim atomic.
 */
export class Migration20261121154000_idempotency extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "gateway"."idempotency_records" (
      "scope" varchar(64) not null,
      "key" varchar(255) not null,
      "fingerprint" char(64) not null,
      "method" varchar(10) not null,
      "path" varchar(2048) not null,
      "state" varchar(16) not null check ("state" in ('in_flight','completed','released')),
      "claim_token" uuid not null,
      "claimed_at" timestamptz not null,
      "response_status" smallint null,
      "response_headers" json null,
      "response_body" text null,
      "created_at" timestamptz not null,
      "completed_at" timestamptz null,
      "expires_at" timestamptz not null,
      primary key ("scope", "key"))`);
    this.addSql(`create index "idempotency_records_expires_at_index" on "gateway"."idempotency_records" ("expires_at")`);
  }
}
