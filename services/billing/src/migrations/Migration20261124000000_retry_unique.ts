import { Migration } from '@mikro-orm/migrations';

/**
 * A Failed charge is retried at most once (contract §7): at most one Charge names it as its
 * original. Billing runs never set `original_transaction_id` on a charge; only a retry does. The
 * retries' optimistic reservation relies on it when the charge has no subscription to
 * compare-and-swap (see `TransactionReservations.retry`).
 */
export class Migration20261124000000_retry_unique extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create unique index "transactions_retry_unique" on "${s}"."transactions" ("original_transaction_id") where "kind" = 'Charge'`);
  }
}
