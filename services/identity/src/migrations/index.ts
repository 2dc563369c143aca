import type { MigrationSource } from '@billing/service-runtime';

/** Every migration of the `identity` schema, in order; each class is imported only to be applied. */
export const MIGRATIONS: MigrationSource[] = [
  { name: 'Migration20261121000000', load: async () => (await import('./Migration20261121000000.js')).Migration20261121000000 },
  { name: 'Migration20261121140000_webhook_events', load: async () => (await import('./Migration20261121140000_webhook_events.js')).Migration20261121140000_webhook_events },
  { name: 'Migration20261121150000_outbox_sequence', load: async () => (await import('./Migration20261121150000_outbox_sequence.js')).Migration20261121150000_outbox_sequence },
  { name: 'Migration20261121160000_customers', load: async () => (await import('./Migration20261121160000_customers.js')).Migration20261121160000_customers },
  { name: 'Migration20261121170000_api_key_endpoints_backfill', load: async () => (await import('./Migration20261121170000_api_key_endpoints_backfill.js')).Migration20261121170000_api_key_endpoints_backfill },
  { name: 'Migration20261122190000_login_abuse', load: async () => (await import('./Migration20261122190000_login_abuse.js')).Migration20261122190000_login_abuse },
  { name: 'Migration20261127000000_customer_email_as_sent', load: async () => (await import('./Migration20261127000000_customer_email_as_sent.js')).Migration20261127000000_customer_email_as_sent },
  { name: 'Migration20261128000000_customer_token_delivery', load: async () => (await import('./Migration20261128000000_customer_token_delivery.js')).Migration20261128000000_customer_token_delivery },
];
