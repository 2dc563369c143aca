import { Migration } from '@mikro-orm/migrations';
import { outboxNotifySql } from '@billing/service-runtime';

/** API key endpoint versions for the `api_key.*` events, and the outbox commit notification. */
export class Migration20261121140000_webhook_events extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "identity"."api_keys" add column "version" int not null default 1`);
    for (const sql of outboxNotifySql('identity')) this.addSql(sql);
  }
}
