import { Migration20261122190000_invitations } from './Migration20261122190000_invitations.js';

/** Every migration of the checkout service's schema, in order. */
export const MIGRATIONS = [{ name: 'Migration20261122190000_invitations', class: Migration20261122190000_invitations }];
