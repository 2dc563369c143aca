import { Migration } from '@mikro-orm/migrations';

/**
 * `Subscription.ownMethodOnly`: a subscription a hosted checkout made is charged on the payment
 * method captured in that checkout only, never on the member's others (the visitor typed an
 * email and proved no claim to an existing member's methods). False for every other
 * subscription, and for those made before it (a rolling deploy's old replicas insert none).
 */
export class Migration20261128000000_subscription_own_method_only extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`alter table "${s}"."subscriptions" add column if not exists "own_method_only" boolean not null default false`);
  }
}
