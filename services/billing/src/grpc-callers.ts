import type { CallerRules } from '@billing/service-runtime';

/** Who may call billing, by the service named in the caller's verified certificate. */
export const BILLING_CALLERS: CallerRules = {
  'billing.v1.Merchants': ['gateway'],
  'billing.v1.Products': ['gateway'],
  'billing.v1.Questions': ['gateway'],
  'billing.v1.Plans': ['gateway'],
  'billing.v1.Members': ['gateway'],
  'billing.v1.PaymentMethods': ['gateway'],
  'billing.v1.Subscriptions': ['gateway'],
};
