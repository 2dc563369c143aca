import { Migration } from '@mikro-orm/migrations';

/**
 * A transaction is billed on one closed (Finalised or Paid) statement at most: taking a
 * statement's lines looks each candidate up among the lines of the others, by transaction.
 */
export class Migration20261125100000_fee_lines_by_transaction extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create index if not exists "fee_statement_lines_transaction_index" on "${s}"."fee_statement_lines" ("transaction_id")`);
  }
}
