import { Migration } from '@mikro-orm/migrations';

/**
 * `transactions_retry_unique` holds the retries alone (a Charge naming an original), as the rule
 * it enforces needs (contract §7: a Failed charge is retried at most once). Over every Charge,
 * it matched a billing run's read of the charges already tried (`original_transaction_id is
 * null`): planned on statistics taken before the run's charges existed, that read took this
 * index for the whole table's billing-run charges and filtered them by subscription, each chunk
 * reading every charge the run had made so far (auto_explain on the billing-run bench: 64,000
 * rows removed and 109 ms for one chunk). Dropped and made again in the migrations' transaction:
 * no moment without the rule.
 */
export class Migration20261124100000_retry_unique_originals extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`drop index "${s}"."transactions_retry_unique"`);
    this.addSql(
      `create unique index "transactions_retry_unique" on "${s}"."transactions" ("original_transaction_id") where "kind" = 'Charge' and "original_transaction_id" is not null`,
    );
  }
}
