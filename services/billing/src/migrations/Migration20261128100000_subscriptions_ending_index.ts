import { Migration } from '@mikro-orm/migrations';

/**
 * The live subscriptions set to cancel at their period end, which every billing run reads to end
 * those whose end has come (`BillingRun.endDue`): few, so a partial index keeps that read from
 * scanning every subscription.
 */
export class Migration20261128100000_subscriptions_ending_index extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create index if not exists "subscriptions_ending_index" on "${s}"."subscriptions" ("id") where "cancel_at_period_end" and "status" <> 'Cancelled'`);
  }
}
