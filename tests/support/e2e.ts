import { inject } from 'vitest';
import { createHttpClient, type HttpClient } from './http.js';

declare module 'vitest' {
  /** What tests/e2e/global-setup.ts provides about the shared test platform. */
  export interface ProvidedContext {
    gatewayUrl: string;
    adminToken: string;
    /** The platform's own database (a fresh `bp_test_*` one). */
    databaseUrl: string;
    natsUrl: string;
    /** The sandbox payment provider's HTTP API (fault switch, tokenisation); '' when not running. */
    sandboxProviderUrl: string;
    /** identity's gRPC address (`127.0.0.1:<port>`). */
    identityGrpcAddress: string;
    /** The gRPC address of identity, billing, checkout and webhooks, by service name. */
    grpcAddresses: Record<string, string>;
    /** The installation's gRPC authority and service certificates (`ca.crt`, `<service>.crt`, `<service>.key`). */
    grpcCertsDir: string;
    /** DATA_DIR of the shared platform's services (email files in `mail/`, SMS in `sms/`). */
    dataDir: string;
    /** Each service's operations listener (`/metrics`, `/health/live`, `/health/ready`), by service name. */
    metricsUrls: Record<string, string>;
  }
}

/** A client for the shared platform's gateway. */
export function gateway(): HttpClient {
  return createHttpClient(inject('gatewayUrl'));
}

export function adminToken(): string {
  return inject('adminToken');
}

/**
 * `startPlatform` options of a platform a test starts beside the shared one: the shared
 * database, NATS and admin token, its services' files in the shared data directory, mode `test`.
 */
export function besideSharedPlatform() {
  return { databaseUrl: inject('databaseUrl'), natsUrl: inject('natsUrl'), mode: 'test' as const, logLevel: 'warn', adminToken: inject('adminToken'), env: { DATA_DIR: inject('dataDir') } };
}
