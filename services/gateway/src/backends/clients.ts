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

export interface Backends {
  identity: IdentityClients;
  billing: { merchants: Client };
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
  const billing = {
    merchants: createClient('billing/v1/merchants.proto', 'billing.v1.Merchants', config.BILLING_GRPC_URL, d),
  };
  return {
    identity,
    billing,
    close() {
      for (const group of [identity, billing]) for (const c of Object.values(group)) c.close();
    },
  };
}
