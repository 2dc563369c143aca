import { Migration } from '@mikro-orm/migrations';

export class Migration20261122190000_member_answers extends Migration {
  override async up(): Promise<void> {
    const s = this.config.get('schema') as string;
    this.addSql(`create table "${s}"."member_answers" (
      "member_id" uuid not null references "${s}"."members" ("id"),
      "question_id" uuid not null references "${s}"."questions" ("id"),
      "merchant_id" uuid not null,
      "product_id" uuid not null,
      "text_value" text null,
      "option_ids" jsonb not null default '[]',
      "updated_at" timestamptz not null,
      primary key ("member_id", "question_id"))`);
    this.addSql(`create index "member_answers_member_product_index" on "${s}"."member_answers" ("member_id", "product_id")`);
  }
}
