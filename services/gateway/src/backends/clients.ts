import { createClient as createServiceClient, type ServiceClient } from '@billing/service-runtime';
import type { ServiceName } from '@billing/proto-types';
import type { GatewayConfig } from '../config.js';

export interface IdentityClients {
  merchantUsers: ServiceClient<'identity.v1.MerchantUsers'>;
  apiKeys: ServiceClient<'identity.v1.ApiKeys'>;
  credentials: ServiceClient<'identity.v1.Credentials'>;
  customers: ServiceClient<'identity.v1.Customers'>;
}

export interface BillingClients {
  merchants: ServiceClient<'billing.v1.Merchants'>;
  products: ServiceClient<'billing.v1.Products'>;
  questions: ServiceClient<'billing.v1.Questions'>;
  plans: ServiceClient<'billing.v1.Plans'>;
  members: ServiceClient<'billing.v1.Members'>;
  answers: ServiceClient<'billing.v1.Answers'>;
  paymentMethods: ServiceClient<'billing.v1.PaymentMethods'>;
  subscriptions: ServiceClient<'billing.v1.Subscriptions'>;
  transactions: ServiceClient<'billing.v1.Transactions'>;
  feeStatements: ServiceClient<'billing.v1.FeeStatements'>;
  /** With BILLING_RUN_DEADLINE_MS: a run over everything due takes far longer than one request. */
  billingRuns: ServiceClient<'billing.v1.BillingRuns'>;
}

export interface WebhooksClients {
  deliveries: ServiceClient<'webhooks.v1.WebhookDeliveries'>;
  endpoints: ServiceClient<'webhooks.v1.WebhookEndpoints'>;
}

export interface CheckoutClients {
  invitations: ServiceClient<'checkout.v1.Invitations'>;
  onboarding: ServiceClient<'checkout.v1.Onboarding'>;
  checkout: ServiceClient<'checkout.v1.Checkout'>;
  pages: ServiceClient<'checkout.v1.Pages'>;
}

export interface Backends {
  identity: IdentityClients;
  billing: BillingClients;
  checkout: CheckoutClients;
  webhooks: WebhooksClients;
  /**
   * Deadline of calls that hash a password (PASSWORD_DEADLINE_MS): scrypt at OWASP cost takes
   * hundreds of milliseconds of CPU each, and a burst of sign-ins queues on identity's thread
   * pool (up to PASSWORD_HASH_MAX_CONCURRENT at once) rather than failing.
   */
  passwordDeadlineMs: number;
  close(): void;
}

/** gRPC clients of every backing service; each call carries the configured deadline. */
export function createBackends(config: GatewayConfig): Backends {
  const d = config.GRPC_DEADLINE_MS;
  // The calls of concurrent requests to one service go out gathered (see createClient).
  const createClient = <N extends ServiceName>(name: N, address: string, deadlineMs: number) => createServiceClient(name, address, deadlineMs, { gather: config.GRPC_GATHER });
  const identity: IdentityClients = {
    merchantUsers: createClient('identity.v1.MerchantUsers', config.IDENTITY_GRPC_URL, d),
    apiKeys: createClient('identity.v1.ApiKeys', config.IDENTITY_GRPC_URL, d),
    credentials: createClient('identity.v1.Credentials', config.IDENTITY_GRPC_URL, d),
    customers: createClient('identity.v1.Customers', config.IDENTITY_GRPC_URL, d),
  };
  const billingClient = <N extends `billing.v1.${string}` & ServiceName>(name: N) => createClient(name, config.BILLING_GRPC_URL, d);
  const billing: BillingClients = {
    merchants: billingClient('billing.v1.Merchants'),
    products: billingClient('billing.v1.Products'),
    questions: billingClient('billing.v1.Questions'),
    plans: billingClient('billing.v1.Plans'),
    members: billingClient('billing.v1.Members'),
    answers: billingClient('billing.v1.Answers'),
    paymentMethods: billingClient('billing.v1.PaymentMethods'),
    subscriptions: billingClient('billing.v1.Subscriptions'),
    transactions: billingClient('billing.v1.Transactions'),
    feeStatements: billingClient('billing.v1.FeeStatements'),
    billingRuns: createClient('billing.v1.BillingRuns', config.BILLING_GRPC_URL, config.BILLING_RUN_DEADLINE_MS),
  };
  const webhooks: WebhooksClients = {
    deliveries: createClient('webhooks.v1.WebhookDeliveries', config.WEBHOOKS_GRPC_URL, d),
    endpoints: createClient('webhooks.v1.WebhookEndpoints', config.WEBHOOKS_GRPC_URL, d),
  };
  const checkout: CheckoutClients = {
    invitations: createClient('checkout.v1.Invitations', config.CHECKOUT_GRPC_URL, d),
    onboarding: createClient('checkout.v1.Onboarding', config.CHECKOUT_GRPC_URL, d),
    checkout: createClient('checkout.v1.Checkout', config.CHECKOUT_GRPC_URL, d),
    pages: createClient('checkout.v1.Pages', config.CHECKOUT_GRPC_URL, d),
  };
  return {
    identity,
    billing,
    checkout,
    webhooks,
    passwordDeadlineMs: config.PASSWORD_DEADLINE_MS,
    close() {
      for (const group of [identity, billing, checkout, webhooks]) for (const c of Object.values(group)) c.close();
    },
  };
}
