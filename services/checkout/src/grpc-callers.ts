import type { CallerRules } from '@billing/service-runtime';

/** Who may call checkout, by the service named in the caller's verified certificate. */
export const CHECKOUT_CALLERS: CallerRules = {
  'checkout.v1.Invitations': ['gateway'],
  'checkout.v1.Onboarding': ['gateway'],
  'checkout.v1.Checkout': ['gateway'],
  'checkout.v1.Pages': ['gateway'],
};
