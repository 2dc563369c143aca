import type { CallerRules } from '@billing/service-runtime';

/**
 * Who may call identity, by the service named in the caller's verified certificate. Only the
 * gateway creates API keys, mints password-reset tokens and signs people in; checkout finds or
 * creates the customer account of an onboarding or checkout and mints checkout-session tokens;
 * only webhooks (which signs deliveries) and checkout (which signs and verifies deep links) read
 * a key's plaintext signing secret; only webhooks reads a key's endpoint state (to sync its copy
 * when the gateway reports a change).
 */
export const IDENTITY_CALLERS: CallerRules = {
  'identity.v1.MerchantUsers': ['gateway'],
  'identity.v1.ApiKeys': ['gateway'],
  'identity.v1.Customers': ['gateway'],
  'identity.v1.Customers/EnsureCustomerAccount': ['gateway', 'checkout'],
  'identity.v1.Customers/GetCustomerAccount': ['gateway', 'checkout'],
  'identity.v1.Credentials': ['gateway'],
  'identity.v1.WebhookSigning': ['webhooks', 'checkout'],
  'identity.v1.ApiKeyEndpoints': ['webhooks'],
  'identity.v1.CheckoutTokens': ['checkout'],
};
