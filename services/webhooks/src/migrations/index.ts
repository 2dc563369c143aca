import { Migration20261121150000_webhooks } from './Migration20261121150000_webhooks.js';

/** Every migration of the `webhooks` schema, in order. */
export const MIGRATIONS = [{ name: 'Migration20261121150000_webhooks', class: Migration20261121150000_webhooks }];
