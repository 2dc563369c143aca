import { createClient as createServiceClient, withSharedReads, type ServiceClient } from '@billing/service-runtime';
import type { CheckoutConfig } from './config.js';

/** gRPC clients of the services checkout's flows drive: identity (customer accounts, link keys, session tokens) and billing. */
export interface CheckoutBackends {
  customers: ServiceClient<'identity.v1.Customers'>;
  signing: ServiceClient<'identity.v1.WebhookSigning'>;
  tokens: ServiceClient<'identity.v1.CheckoutTokens'>;
  merchants: ServiceClient<'billing.v1.Merchants'>;
  plans: ServiceClient<'billing.v1.Plans'>;
  questions: ServiceClient<'billing.v1.Questions'>;
  enrolments: ServiceClient<'billing.v1.Enrolments'>;
  providerTokens: ServiceClient<'billing.v1.ProviderTokens'>;
  close(): void;
}

export function createCheckoutBackends(config: CheckoutConfig): CheckoutBackends {
  const d = config.GRPC_DEADLINE_MS;
  const i = config.IDENTITY_GRPC_URL;
  const b = config.BILLING_GRPC_URL;
  // The calls of concurrent flows to one service go out gathered (see createClient): every
  // invitation, completion and preview ensures an account, every completion enrols.
  const createClient = <N extends Parameters<typeof createServiceClient>[0]>(name: N, address: string, deadlineMs: number) => createServiceClient(name, address, deadlineMs, { gather: config.GRPC_GATHER });
  const clients = {
    customers: createClient('identity.v1.Customers', i, d),
    // The reads every link, session and onboarding makes alike (one merchant's key, plans and
    // questions) are shared between concurrent identical requests (see withSharedReads).
    signing: withSharedReads(createClient('identity.v1.WebhookSigning', i, d), ['GetSigningSecret']),
    tokens: createClient('identity.v1.CheckoutTokens', i, d),
    merchants: withSharedReads(createClient('billing.v1.Merchants', b, d), ['GetMerchant']),
    plans: withSharedReads(createClient('billing.v1.Plans', b, d), ['GetPlan']),
    questions: withSharedReads(createClient('billing.v1.Questions', b, d), ['ListQuestions']),
    enrolments: createClient('billing.v1.Enrolments', b, d),
    providerTokens: createClient('billing.v1.ProviderTokens', b, d),
  };
  return {
    ...clients,
    close() {
      for (const c of Object.values(clients)) c.close();
    },
  };
}
