import type { MigrationSource } from '@billing/service-runtime';

/** Every migration of the checkout service's schema, in order; each class is imported only to be applied. */
export const MIGRATIONS: MigrationSource[] = [
  { name: 'Migration20261122190000_invitations', load: async () => (await import('./Migration20261122190000_invitations.js')).Migration20261122190000_invitations },
  { name: 'Migration20261122193000_checkout_sessions', load: async () => (await import('./Migration20261122193000_checkout_sessions.js')).Migration20261122193000_checkout_sessions },
  {
    name: 'Migration20261123120000_onboarding_completion_lease',
    load: async () => (await import('./Migration20261123120000_onboarding_completion_lease.js')).Migration20261123120000_onboarding_completion_lease,
  },
  {
    name: 'Migration20261125050000_session_completion_token',
    load: async () => (await import('./Migration20261125050000_session_completion_token.js')).Migration20261125050000_session_completion_token,
  },
  { name: 'Migration20261130000000_invitation_email_index', load: async () => (await import('./Migration20261130000000_invitation_email_index.js')).Migration20261130000000_invitation_email_index },
];
