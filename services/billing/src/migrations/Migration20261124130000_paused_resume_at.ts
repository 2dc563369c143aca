import { Migration } from '@mikro-orm/migrations';

/** The paused subscriptions a billing run resumes at their `resume_at` (`BillingRun.resumeDue`), found without a scan. */
export class Migration20261124130000_paused_resume_at extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create index "subscriptions_paused_resume_at_index" on "${s}"."subscriptions" ("resume_at") where "status" = 'Paused' and "resume_at" is not null`);
  }
}
