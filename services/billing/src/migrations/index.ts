import { Migration20261121000000 } from './Migration20261121000000.js';
import { Migration20261121140000_outbox_notify } from './Migration20261121140000_outbox_notify.js';

/** Every migration of the `billing` schema, in order. */
export const MIGRATIONS = [
  { name: 'Migration20261121000000', class: Migration20261121000000 },
  { name: 'Migration20261121140000_outbox_notify', class: Migration20261121140000_outbox_notify },
];
