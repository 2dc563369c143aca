import { Migration20261121000000 } from './Migration20261121000000.js';

/** Every migration of the `billing` schema, in order. */
export const MIGRATIONS = [{ name: 'Migration20261121000000', class: Migration20261121000000 }];
