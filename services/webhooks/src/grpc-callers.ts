import type { CallerRules } from '@billing/service-runtime';

/** Who may call webhooks, by the service named in the caller's verified certificate. */
export const WEBHOOKS_CALLERS: CallerRules = {
  'webhooks.v1.WebhookDeliveries': ['gateway'],
  'webhooks.v1.WebhookEndpoints': ['gateway'],
};
