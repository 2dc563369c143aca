import { Migration } from '@mikro-orm/migrations';
import { outboxRelaySql } from '@billing/service-runtime';

/** The outbox's insertion order (`seq`), which the relay publishes in. */
export class Migration20261121150000_outbox_sequence extends Migration {
  override async up(): Promise<void> {
    for (const sql of outboxRelaySql('identity')) this.addSql(sql);
  }
}
