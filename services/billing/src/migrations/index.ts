import type { MigrationSource } from '@billing/service-runtime';

/** Every migration of the `billing` schema, in order; each class is imported only to be applied. */
export const MIGRATIONS: MigrationSource[] = [
  { name: 'Migration20261121000000', load: async () => (await import('./Migration20261121000000.js')).Migration20261121000000 },
  { name: 'Migration20261121140000_outbox_notify', load: async () => (await import('./Migration20261121140000_outbox_notify.js')).Migration20261121140000_outbox_notify },
  { name: 'Migration20261121150000_outbox_sequence', load: async () => (await import('./Migration20261121150000_outbox_sequence.js')).Migration20261121150000_outbox_sequence },
  { name: 'Migration20261122000100_products', load: async () => (await import('./Migration20261122000100_products.js')).Migration20261122000100_products },
  { name: 'Migration20261122000200_questions', load: async () => (await import('./Migration20261122000200_questions.js')).Migration20261122000200_questions },
  { name: 'Migration20261122000300_plans', load: async () => (await import('./Migration20261122000300_plans.js')).Migration20261122000300_plans },
  { name: 'Migration20261122000400_members', load: async () => (await import('./Migration20261122000400_members.js')).Migration20261122000400_members },
  { name: 'Migration20261122000500_payment_methods', load: async () => (await import('./Migration20261122000500_payment_methods.js')).Migration20261122000500_payment_methods },
  { name: 'Migration20261122000600_subscriptions', load: async () => (await import('./Migration20261122000600_subscriptions.js')).Migration20261122000600_subscriptions },
  { name: 'Migration20261122100000_billing_engine', load: async () => (await import('./Migration20261122100000_billing_engine.js')).Migration20261122100000_billing_engine },
  { name: 'Migration20261122190000_member_answers', load: async () => (await import('./Migration20261122190000_member_answers.js')).Migration20261122190000_member_answers },
  { name: 'Migration20261124000000_retry_unique', load: async () => (await import('./Migration20261124000000_retry_unique.js')).Migration20261124000000_retry_unique },
  { name: 'Migration20261124100000_retry_unique_originals', load: async () => (await import('./Migration20261124100000_retry_unique_originals.js')).Migration20261124100000_retry_unique_originals },
  { name: 'Migration20261124130000_paused_resume_at', load: async () => (await import('./Migration20261124130000_paused_resume_at.js')).Migration20261124130000_paused_resume_at },
  { name: 'Migration20261125000000_terminal_pause_write_off', load: async () => (await import('./Migration20261125000000_terminal_pause_write_off.js')).Migration20261125000000_terminal_pause_write_off },
  { name: 'Migration20261125100000_fee_lines_by_transaction', load: async () => (await import('./Migration20261125100000_fee_lines_by_transaction.js')).Migration20261125100000_fee_lines_by_transaction },
  { name: 'Migration20261126100000_outcome_unknown_at', load: async () => (await import('./Migration20261126100000_outcome_unknown_at.js')).Migration20261126100000_outcome_unknown_at },
  { name: 'Migration20261128000000_subscription_own_method_only', load: async () => (await import('./Migration20261128000000_subscription_own_method_only.js')).Migration20261128000000_subscription_own_method_only },
  { name: 'Migration20261128100000_subscriptions_ending_index', load: async () => (await import('./Migration20261128100000_subscriptions_ending_index.js')).Migration20261128100000_subscriptions_ending_index },
  { name: 'Migration20261129000000_enrolment_claims', load: async () => (await import('./Migration20261129000000_enrolment_claims.js')).Migration20261129000000_enrolment_claims },
  { name: 'Migration20261129000100_subscription_enrolment_key', load: async () => (await import('./Migration20261129000100_subscription_enrolment_key.js')).Migration20261129000100_subscription_enrolment_key },
  { name: 'Migration20261130000000_list_indexes', load: async () => (await import('./Migration20261130000000_list_indexes.js')).Migration20261130000000_list_indexes },
];
