import { Migration } from '@mikro-orm/migrations';

/**
 * Enrolments of one member email to one plan take turns (`enrolmentsGrpc`): an enrolment holds
 * the claim of its (merchant, email, plan) from its refusal check until its subscription is
 * written, so a concurrent one checks after it and is refused before writing anything. A claim
 * is deleted when its enrolment ends; one whose process died is taken over once `held_until`
 * has passed, or at once by a repeat of the same enrolment (`enrolment_key`).
 */
export class Migration20261129000000_enrolment_claims extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create table if not exists "${s}"."enrolment_claims" (
      "merchant_id" uuid not null,
      "email_key" text not null,
      "plan_id" uuid not null,
      "enrolment_key" text not null,
      "held_until" timestamptz not null,
      constraint "enrolment_claims_pkey" primary key ("merchant_id", "email_key", "plan_id"))`);
  }
}
