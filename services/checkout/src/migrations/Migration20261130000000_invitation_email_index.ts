import { Migration } from '@mikro-orm/migrations';

/**
 * `GET /api/Invitations?email=` (`ListInvitations`) compares `lower(email)`, which no index held:
 * finding one invitation read every invitation of the merchant (100,000 invitations: 99,999 rows
 * filtered out, twice, for the page and its count).
 */
export class Migration20261130000000_invitation_email_index extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create index if not exists "invitations_merchant_email_index" on "${s}"."invitations" ("merchant_id", lower("email"), "created_at" desc, "id")`);
  }
}
