import type { MigrationSource } from '@billing/service-runtime';

/** Every migration of the `webhooks` schema, in order; each class is imported only to be applied. */
export const MIGRATIONS: MigrationSource[] = [
  { name: 'Migration20261121150000_webhooks', load: async () => (await import('./Migration20261121150000_webhooks.js')).Migration20261121150000_webhooks },
  { name: 'Migration20261121170000_delivery_indexes', load: async () => (await import('./Migration20261121170000_delivery_indexes.js')).Migration20261121170000_delivery_indexes },
  { name: 'Migration20261122190000_attempt_error_categories', load: async () => (await import('./Migration20261122190000_attempt_error_categories.js')).Migration20261122190000_attempt_error_categories },
  { name: 'Migration20261124200000_live_endpoints_index', load: async () => (await import('./Migration20261124200000_live_endpoints_index.js')).Migration20261124200000_live_endpoints_index },
  { name: 'Migration20261130000000_delivery_status_index', load: async () => (await import('./Migration20261130000000_delivery_status_index.js')).Migration20261130000000_delivery_status_index },
];
