import { Migration20261121000000 } from './Migration20261121000000.js';
import { Migration20261121140000_outbox_notify } from './Migration20261121140000_outbox_notify.js';
import { Migration20261121150000_outbox_sequence } from './Migration20261121150000_outbox_sequence.js';
import { Migration20261122000100_products } from './Migration20261122000100_products.js';
import { Migration20261122000200_questions } from './Migration20261122000200_questions.js';
import { Migration20261122000300_plans } from './Migration20261122000300_plans.js';
import { Migration20261122000400_members } from './Migration20261122000400_members.js';
import { Migration20261122000500_payment_methods } from './Migration20261122000500_payment_methods.js';
import { Migration20261122000600_subscriptions } from './Migration20261122000600_subscriptions.js';
import { Migration20261122100000_billing_engine } from './Migration20261122100000_billing_engine.js';
import { Migration20261122190000_member_answers } from './Migration20261122190000_member_answers.js';

/** Every migration of the `billing` schema, in order. */
export const MIGRATIONS = [
  { name: 'Migration20261121000000', class: Migration20261121000000 },
  { name: 'Migration20261121140000_outbox_notify', class: Migration20261121140000_outbox_notify },
  { name: 'Migration20261121150000_outbox_sequence', class: Migration20261121150000_outbox_sequence },
  { name: 'Migration20261122000100_products', class: Migration20261122000100_products },
  { name: 'Migration20261122000200_questions', class: Migration20261122000200_questions },
  { name: 'Migration20261122000300_plans', class: Migration20261122000300_plans },
  { name: 'Migration20261122000400_members', class: Migration20261122000400_members },
  { name: 'Migration20261122000500_payment_methods', class: Migration20261122000500_payment_methods },
  { name: 'Migration20261122000600_subscriptions', class: Migration20261122000600_subscriptions },
  { name: 'Migration20261122100000_billing_engine', class: Migration20261122100000_billing_engine },
  { name: 'Migration20261122190000_member_answers', class: Migration20261122190000_member_answers },
];
