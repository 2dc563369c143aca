import type { MigrationSource } from '@billing/service-runtime';

/** Every migration of the `gateway` schema, in order; each class is imported only to be applied. */
export const MIGRATIONS: MigrationSource[] = [
  { name: 'Migration20261121154000_idempotency', load: async () => (await import('./Migration20261121154000_idempotency.js')).Migration20261121154000_idempotency },
  { name: 'Migration20261124120000_idempotency_fillfactor', load: async () => (await import('./Migration20261124120000_idempotency_fillfactor.js')).Migration20261124120000_idempotency_fillfactor },
];
