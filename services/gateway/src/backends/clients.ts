import { createClient, type CallOptions } from '@billing/service-runtime';
import type { GatewayConfig } from '../config.js';

type Rpc = (request: any, options?: CallOptions) => Promise<any>;
type Client = Record<string, Rpc> & { close(): void };

export interface IdentityClients {
  merchantUsers: Client;
  apiKeys: Client;
  credentials: Client;
  customers: Client;
}

export interface BillingClients {
  merchants: Client;
  products: Client;
  questions: Client;
  plans: Client;
  members: Client;
  paymentMethods: Client;
  subscriptions: Client;
}

export interface WebhooksClients {
  deliveries: Client;
}

export interface Backends {
  identity: IdentityClients;
  billing: BillingClients;
  webhooks: WebhooksClients;
  close(): void;
}

/** gRPC clients of every backing service; each call carries the configured deadline. */
export function createBackends(config: GatewayConfig): Backends {
  const d = config.GRPC_DEADLINE_MS;
  const identity: IdentityClients = {
    merchantUsers: createClient('identity/v1/merchant_users.proto', 'identity.v1.MerchantUsers', config.IDENTITY_GRPC_URL, d),
    apiKeys: createClient('identity/v1/api_keys.proto', 'identity.v1.ApiKeys', config.IDENTITY_GRPC_URL, d),
    credentials: createClient('identity/v1/credentials.proto', 'identity.v1.Credentials', config.IDENTITY_GRPC_URL, d),
    customers: createClient('identity/v1/customers.proto', 'identity.v1.Customers', config.IDENTITY_GRPC_URL, d),
  };
  const billingClient = (file: string, service: string) => createClient(`billing/v1/${file}`, `billing.v1.${service}`, config.BILLING_GRPC_URL, d);
  const billing: BillingClients = {
    merchants: billingClient('merchants.proto', 'Merchants'),
    products: billingClient('products.proto', 'Products'),
    questions: billingClient('questions.proto', 'Questions'),
    plans: billingClient('plans.proto', 'Plans'),
    members: billingClient('members.proto', 'Members'),
    paymentMethods: billingClient('payment_methods.proto', 'PaymentMethods'),
    subscriptions: billingClient('subscriptions.proto', 'Subscriptions'),
  };
  const webhooks: WebhooksClients = {
    deliveries: createClient('webhooks/v1/deliveries.proto', 'webhooks.v1.WebhookDeliveries', config.WEBHOOKS_GRPC_URL, d),
  };
  return {
    identity,
    billing,
    webhooks,
    close() {
      for (const group of [identity, billing, webhooks]) for (const c of Object.values(group)) c.close();
    },
  };
}

/**
 * Deadline of calls that hash a password (scrypt at OWASP cost takes hundreds of milliseconds
 * of CPU each; a burst of sign-ins queues on identity's thread pool rather than failing).
 */
export const PASSWORD_WORK_DEADLINE_MS = 15_000;
