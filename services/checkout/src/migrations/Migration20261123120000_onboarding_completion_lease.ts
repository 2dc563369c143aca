import { Migration } from '@mikro-orm/migrations';

/**
 * An onboarding's completion lease: a completion holds its wizard by this column, committed,
 * instead of by a row lock held through its calls to billing (which held a pooled connection
 * for as long, and queued every other statement of the service behind the completions).
 */
export class Migration20261123120000_onboarding_completion_lease extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') ?? 'checkout';
    this.addSql(`alter table "${s}"."onboardings" add column "completion_lease_until" timestamptz null`);
  }
}
