import { Migration } from '@mikro-orm/migrations';
import { outboxTableSql } from '@billing/service-runtime';

export class Migration20261121000000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table if not exists "identity"."signing_keys" (
      "kid" varchar(255) primary key,
      "private_key_sealed" text not null,
      "public_jwk" jsonb not null,
      "created_at" timestamptz not null)`);
    this.addSql(`create table "identity"."merchant_users" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "email" varchar(256) not null,
      "password_hash" text not null,
      "full_name" varchar(255) not null,
      "role" varchar(16) not null check ("role" in ('Owner','Admin','Staff','Viewer')),
      "is_active" boolean not null default true,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create unique index "merchant_users_email_unique" on "identity"."merchant_users" (lower("email"))`);
    this.addSql(`create index "merchant_users_merchant_id_index" on "identity"."merchant_users" ("merchant_id")`);
    this.addSql(`create table "identity"."api_keys" (
      "id" uuid primary key,
      "merchant_id" uuid not null,
      "name" varchar(255) not null,
      "key_hash" char(64) not null,
      "key_prefix" varchar(16) not null,
      "signing_secret_sealed" text not null,
      "signing_secret_prefix" varchar(16) not null,
      "webhook_url" text null,
      "webhook_events" jsonb null,
      "webhook_enabled" boolean not null default false,
      "expires_at" timestamptz null,
      "last_used_at" timestamptz null,
      "revoked_at" timestamptz null,
      "created_at" timestamptz not null,
      "updated_at" timestamptz not null)`);
    this.addSql(`create unique index "api_keys_key_hash_unique" on "identity"."api_keys" ("key_hash")`);
    this.addSql(`create index "api_keys_merchant_id_index" on "identity"."api_keys" ("merchant_id", "created_at" desc)`);
    this.addSql(`create table "identity"."credential_changes" (
      "cursor" bigserial primary key,
      "kind" varchar(32) not null,
      "subject_id" uuid not null,
      "revoked" boolean not null,
      "at" timestamptz not null default now())`);
    for (const sql of outboxTableSql('identity')) this.addSql(sql);
  }
}
