import { createClient, type ServiceClient } from '@billing/service-runtime';
import type { CheckoutConfig } from './config.js';

/** gRPC clients of the services checkout's flows drive: identity (customer accounts) and billing. */
export interface CheckoutBackends {
  customers: ServiceClient<'identity.v1.Customers'>;
  merchants: ServiceClient<'billing.v1.Merchants'>;
  plans: ServiceClient<'billing.v1.Plans'>;
  questions: ServiceClient<'billing.v1.Questions'>;
  members: ServiceClient<'billing.v1.Members'>;
  paymentMethods: ServiceClient<'billing.v1.PaymentMethods'>;
  subscriptions: ServiceClient<'billing.v1.Subscriptions'>;
  answers: ServiceClient<'billing.v1.Answers'>;
  close(): void;
}

export function createCheckoutBackends(config: CheckoutConfig): CheckoutBackends {
  const d = config.GRPC_DEADLINE_MS;
  const b = config.BILLING_GRPC_URL;
  const clients = {
    customers: createClient('identity.v1.Customers', config.IDENTITY_GRPC_URL, d),
    merchants: createClient('billing.v1.Merchants', b, d),
    plans: createClient('billing.v1.Plans', b, d),
    questions: createClient('billing.v1.Questions', b, d),
    members: createClient('billing.v1.Members', b, d),
    paymentMethods: createClient('billing.v1.PaymentMethods', b, d),
    subscriptions: createClient('billing.v1.Subscriptions', b, d),
    answers: createClient('billing.v1.Answers', b, d),
  };
  return {
    ...clients,
    close() {
      for (const c of Object.values(clients)) c.close();
    },
  };
}
