import { Migration20261121154000_idempotency } from './Migration20261121154000_idempotency.js';

/** Every migration of the `gateway` schema, in order. */
export const MIGRATIONS = [{ name: 'Migration20261121154000_idempotency', class: Migration20261121154000_idempotency }];
