import { Migration20261122190000_invitations } from './Migration20261122190000_invitations.js';
import { Migration20261122193000_checkout_sessions } from './Migration20261122193000_checkout_sessions.js';

/** Every migration of the checkout service's schema, in order. */
export const MIGRATIONS = [
  { name: 'Migration20261122190000_invitations', class: Migration20261122190000_invitations },
  { name: 'Migration20261122193000_checkout_sessions', class: Migration20261122193000_checkout_sessions },
];
