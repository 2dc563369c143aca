import { Migration } from '@mikro-orm/migrations';

/**
 * Every attempt's status change rewrote an entry in the finished-deliveries index; retention
 * finds old finished deliveries through the creation-time index instead.
 */
export class Migration20261121170000_delivery_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop index if exists "webhooks"."deliveries_finished_index"`);
  }
}
