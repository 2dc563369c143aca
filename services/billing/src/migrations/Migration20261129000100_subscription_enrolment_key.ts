import { Migration } from '@mikro-orm/migrations';

/**
 * `subscriptions.enrolment_key`: the caller's operation (a checkout session, an invitation) whose
 * enrolment made the subscription, null for one made otherwise (CreateSubscription), so an
 * enrolment adopts only a subscription its own interrupted run made, never one a concurrent
 * enrolment of another invitation made. Those made before it, and by a rolling deploy's old
 * replicas, have none (null: adopted as before).
 */
export class Migration20261129000100_subscription_enrolment_key extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`alter table "${s}"."subscriptions" add column if not exists "enrolment_key" text null`);
  }
}
