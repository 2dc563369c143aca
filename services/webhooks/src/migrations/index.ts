import { Migration20261121150000_webhooks } from './Migration20261121150000_webhooks.js';
import { Migration20261121170000_delivery_indexes } from './Migration20261121170000_delivery_indexes.js';
import { Migration20261122190000_attempt_error_categories } from './Migration20261122190000_attempt_error_categories.js';

/** Every migration of the `webhooks` schema, in order. */
export const MIGRATIONS = [
  { name: 'Migration20261121150000_webhooks', class: Migration20261121150000_webhooks },
  { name: 'Migration20261121170000_delivery_indexes', class: Migration20261121170000_delivery_indexes },
  { name: 'Migration20261122190000_attempt_error_categories', class: Migration20261122190000_attempt_error_categories },
];
