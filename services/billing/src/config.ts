import { z } from 'zod';
import { BaseConfig, DatabaseUrl, DatabaseTuning, DbPoolMax, DEV_ENCRYPTION_KEY, FixedSchema, TimerMs, parseConfig, refuseWeakSecretsInProduction, NatsConfig } from '@billing/service-runtime';

export const BillingConfig = BaseConfig.extend({
  DATABASE_URL: DatabaseUrl,
  ...NatsConfig.shape,
  BILLING_GRPC_ADDRESS: z.string().default('127.0.0.1:50052'),
  /** Key of the secrets billing keeps encrypted; its own, never another service's. Development default outside production. */
  BILLING_ENCRYPTION_KEY: z.string().min(32).default(DEV_ENCRYPTION_KEY),
  DB_SCHEMA: FixedSchema('billing'),
  DB_POOL_MAX: DbPoolMax,
  ...DatabaseTuning.shape,
  /** Base URL of the sandbox payment provider (Staging merchants). */
  PAYMENT_PROVIDER_URL: z.url().default('http://127.0.0.1:8090'),
  /** Timeout of each payment-provider call; past it the call is provider_unavailable (502). At most 2^31-1 ms (a timer given more fires after 1 ms). */
  PAYMENT_PROVIDER_TIMEOUT_MS: TimerMs(100).default(3000),
  /** Kept-alive connections to the payment provider at most; calls beyond them wait (within their timeout). */
  PAYMENT_PROVIDER_MAX_SOCKETS: z.coerce.number().int().min(1).max(4096).default(128),
  /**
   * Interval of the scheduled billing run (asOf = now); 0 turns the scheduler off (tests use asOf).
   * At most 2^31-1 ms (24.8 days): a timer given more fires every millisecond instead.
   */
  BILLING_RUN_INTERVAL_MS: TimerMs(0).default(60_000),
  /** Subscriptions claimed per chunk of a billing run. */
  BILLING_RUN_CHUNK_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  /** Chunks of one run processed at once. */
  BILLING_RUN_WORKERS: z.coerce.number().int().min(1).max(32).default(3),
  /** Provider calls in flight per chunk. */
  BILLING_RUN_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(64),
  /** How long a run's claim on a subscription or an unconfirmed provider call lasts (crash recovery waits this long). */
  BILLING_CLAIM_LEASE_MS: z.coerce.number().int().min(100).default(120_000),
  /**
   * How long a cancel of a subscription a billing run (or a manual retry) is charging right now
   * waits for the charge's answer before answering 409 (try again); under the gateway's gRPC deadline.
   */
  BILLING_CANCEL_WAIT_MS: z.coerce.number().int().min(0).default(3000),
  /**
   * How long an enrolment (a checkout or onboarding completion) waits for a concurrent one of the
   * same member email and plan before answering conflict; under the callers' gRPC deadline.
   */
  BILLING_ENROL_WAIT_MS: z.coerce.number().int().min(0).default(3000),
  /**
   * Test only (ignored in production mode): a file naming an enrolment step (`enrol-after-member`,
   * `enrol-after-payment-method`); the next enrolment deletes it and kills its own process right
   * after that step.
   */
  BILLING_FAULT_FILE: z.string().optional(),
});
export type BillingConfig = z.infer<typeof BillingConfig>;

export function loadConfig(env = process.env): BillingConfig {
  const config = parseConfig(BillingConfig, env);
  // As set (not the development default parsing filled in), so a missing key is named missing.
  refuseWeakSecretsInProduction(config.PLATFORM_MODE, { BILLING_ENCRYPTION_KEY: env.BILLING_ENCRYPTION_KEY }, { nats: config });
  return config;
}
