import { Migration } from '@mikro-orm/migrations';

/**
 * The provider token a checkout session's completion attempt was made with, kept with its lease:
 * an attempt whose process died leaves both, and the recovery job finishes it with that token
 * (`CompletionRecovery`).
 */
export class Migration20261125050000_session_completion_token extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') ?? 'checkout';
    this.addSql(`alter table "${s}"."sessions" add column "completion_token" text null`);
  }
}
