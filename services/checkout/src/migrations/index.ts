import { Migration20261122190000_checkout } from './Migration20261122190000_checkout.js';

/** Every migration of the checkout schema, in order. */
export const MIGRATIONS = [{ name: 'Migration20261122190000_checkout', class: Migration20261122190000_checkout }];
