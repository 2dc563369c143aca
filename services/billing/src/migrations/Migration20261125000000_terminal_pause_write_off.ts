import { Migration } from '@mikro-orm/migrations';

/**
 * A Paused subscription that still records a period being collected resumes PastDue
 * (`Subscription.resume`). The terminal action Pause used to leave that record in place: its
 * rows (paused by a billing run at or after their last due retry) get it cleared, so they keep
 * resuming into a new period, the failed one written off as it was when they were paused.
 */
export class Migration20261125000000_terminal_pause_write_off extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`update "${s}"."subscriptions" set "dunning_period_start" = null, "dunning_started_at" = null, "retry_count" = 0
      where "status" = 'Paused' and "dunning_period_start" is not null and "next_billing_at" <= "paused_at"`);
  }
}
