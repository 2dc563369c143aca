import { Migration } from '@mikro-orm/migrations';

/**
 * Customer tokens record how they were delivered: `email` (a link sent to the account's address)
 * or `handed_out` (a support-desk reset token answered to the platform admin). A password reset
 * with an emailed token proves control of the address and verifies it; a handed-out one must not.
 *
 * The default is the side that proves nothing: reset tokens already stored cannot be told apart
 * (they live an hour, so only a reset in that hour misses the verification), and replicas of the
 * previous release, still running during a rolling deploy, insert without the column. Verification
 * tokens were always emailed, so they are marked so. Unqualified names: the connection's
 * search_path is the service's schema.
 */
export class Migration20261128000000_customer_token_delivery extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table customer_tokens add column delivery varchar(16) not null default 'handed_out' check (delivery in ('email', 'handed_out'))`);
    this.addSql(`update customer_tokens set delivery = 'email' where purpose = 'email_verification'`);
  }
}
