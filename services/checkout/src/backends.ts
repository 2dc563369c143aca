import { createClient, type CallOptions, type ServiceClient } from '@billing/service-runtime';
import type { CheckoutConfig } from './config.js';

/**
 * How the checkout service names itself to identity's internal-only services (signing secrets,
 * checkout tokens). Declared once here so the caller identity can move to transport
 * credentials without touching the call sites.
 */
export const AS_CHECKOUT: CallOptions = { metadata: { 'x-internal-caller': 'checkout' } };

export interface CheckoutBackends {
  signing: ServiceClient<'identity.v1.WebhookSigning'>;
  tokens: ServiceClient<'identity.v1.CheckoutTokens'>;
  customers: ServiceClient<'identity.v1.Customers'>;
  merchants: ServiceClient<'billing.v1.Merchants'>;
  plans: ServiceClient<'billing.v1.Plans'>;
  members: ServiceClient<'billing.v1.Members'>;
  paymentMethods: ServiceClient<'billing.v1.PaymentMethods'>;
  subscriptions: ServiceClient<'billing.v1.Subscriptions'>;
  providerTokens: ServiceClient<'billing.v1.ProviderTokens'>;
  close(): void;
}

/** gRPC clients of identity and billing, each call with the configured deadline. */
export function createBackends(config: CheckoutConfig): CheckoutBackends {
  const d = config.GRPC_DEADLINE_MS;
  const clients = {
    signing: createClient('identity.v1.WebhookSigning', config.IDENTITY_GRPC_URL, d),
    tokens: createClient('identity.v1.CheckoutTokens', config.IDENTITY_GRPC_URL, d),
    customers: createClient('identity.v1.Customers', config.IDENTITY_GRPC_URL, d),
    merchants: createClient('billing.v1.Merchants', config.BILLING_GRPC_URL, d),
    plans: createClient('billing.v1.Plans', config.BILLING_GRPC_URL, d),
    members: createClient('billing.v1.Members', config.BILLING_GRPC_URL, d),
    paymentMethods: createClient('billing.v1.PaymentMethods', config.BILLING_GRPC_URL, d),
    subscriptions: createClient('billing.v1.Subscriptions', config.BILLING_GRPC_URL, d),
    providerTokens: createClient('billing.v1.ProviderTokens', config.BILLING_GRPC_URL, d),
  };
  return {
    ...clients,
    close: () => {
      for (const c of Object.values(clients)) c.close();
    },
  };
}
