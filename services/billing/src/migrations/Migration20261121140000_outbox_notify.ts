import { Migration } from '@mikro-orm/migrations';
import { outboxNotifySql } from '@billing/service-runtime';

/** Wakes the outbox relay at commit (LISTEN/NOTIFY) instead of waiting for its next poll. */
export class Migration20261121140000_outbox_notify extends Migration {
  override async up(): Promise<void> {
    for (const sql of outboxNotifySql('billing')) this.addSql(sql);
  }
}
