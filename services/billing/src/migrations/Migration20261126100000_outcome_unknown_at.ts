import { Migration } from '@mikro-orm/migrations';

/**
 * When a `Processing` transaction's provider call was first known to have had no answer
 * (`Transaction.outcomeUnknownAt`): a refund of a charge with a refund of unknown outcome is
 * refused until a billing run has recorded it (`TransactionReservations.refund`).
 */
export class Migration20261126100000_outcome_unknown_at extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`alter table "${s}"."transactions" add column if not exists "outcome_unknown_at" timestamptz null`);
  }
}
