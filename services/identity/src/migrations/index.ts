import { Migration20261121000000 } from './Migration20261121000000.js';
import { Migration20261121140000_webhook_events } from './Migration20261121140000_webhook_events.js';
import { Migration20261121150000_outbox_sequence } from './Migration20261121150000_outbox_sequence.js';
import { Migration20261121160000_customers } from './Migration20261121160000_customers.js';
import { Migration20261121170000_api_key_endpoints_backfill } from './Migration20261121170000_api_key_endpoints_backfill.js';
import { Migration20261122190000_login_abuse } from './Migration20261122190000_login_abuse.js';

/** Every migration of the `identity` schema, in order. */
export const MIGRATIONS = [
  { name: 'Migration20261121000000', class: Migration20261121000000 },
  { name: 'Migration20261121140000_webhook_events', class: Migration20261121140000_webhook_events },
  { name: 'Migration20261121150000_outbox_sequence', class: Migration20261121150000_outbox_sequence },
  { name: 'Migration20261121160000_customers', class: Migration20261121160000_customers },
  { name: 'Migration20261121170000_api_key_endpoints_backfill', class: Migration20261121170000_api_key_endpoints_backfill },
  { name: 'Migration20261122190000_login_abuse', class: Migration20261122190000_login_abuse },
];
