import { Migration } from '@mikro-orm/migrations';

/**
 * `GET /api/WebhookDeliveries?status=` (`ListDeliveries`): a merchant's deliveries of one status,
 * newest first. The index by merchant alone made that read scan and sort every delivery of the
 * merchant on each page (50,000 deliveries, 1,000 of them Failed: 49,001 rows filtered out and
 * all the Failed ones sorted for each page of 200). Its rows change status once or twice, and
 * the due index's predicate names the status already, so it adds no update that was HOT.
 */
export class Migration20261130000000_delivery_status_index extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create index if not exists "deliveries_merchant_status_index" on "${s}"."deliveries" ("merchant_id", "status", "created_at" desc, "id")`);
  }
}
