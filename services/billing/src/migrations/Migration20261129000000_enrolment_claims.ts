import { Migration } from '@mikro-orm/migrations';

/**
 * Enrolments of one member email to one plan take turns (`enrolmentsGrpc`): an enrolment holds
 * the claim of its (merchant, email, plan) from its refusal check until its subscription is
 * written, so a concurrent one checks after it and is refused before writing anything. A claim
 * is deleted when its enrolment ends; one whose process died is taken over once `held_until`
 * has passed, or at once by a repeat of the same enrolment (`enrolment_key`).
 *
 * Unlogged: a claim lives for one enrolment (milliseconds), so its rows need no WAL, and writing
 * none spares every completion two WAL flushes. A crash (or a failover to a standby, which never
 * has the rows) empties the table, which frees claims early: at worst two enrolments racing
 * right then are held to one subscription by the live-subscription index alone, as before claims.
 */
export class Migration20261129000000_enrolment_claims extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create unlogged table if not exists "${s}"."enrolment_claims" (
      "merchant_id" uuid not null,
      "email_key" text not null,
      "plan_id" uuid not null,
      "enrolment_key" text not null,
      "held_until" timestamptz not null,
      constraint "enrolment_claims_pkey" primary key ("merchant_id", "email_key", "plan_id"))`);
  }
}
