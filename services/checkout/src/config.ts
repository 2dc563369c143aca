import { z } from 'zod';
import { DEFAULT_INVITATION_EXPIRY_DAYS } from '@billing/contracts';
import { BaseConfig, DatabaseUrl, DatabaseTuning, DbPoolMax, FixedSchema, TimerMs, GrpcGather, MessagingConfig, parseConfig, NatsConfig, refuseWeakSecretsInProduction } from '@billing/service-runtime';

export const CheckoutConfig = BaseConfig.extend({
  DATABASE_URL: DatabaseUrl,
  ...NatsConfig.shape,
  CHECKOUT_GRPC_ADDRESS: z.string().default('127.0.0.1:50053'),
  DB_SCHEMA: FixedSchema('checkout'),
  DB_POOL_MAX: DbPoolMax,
  ...DatabaseTuning.shape,
  IDENTITY_GRPC_URL: z.string().default('127.0.0.1:50051'),
  BILLING_GRPC_URL: z.string().default('127.0.0.1:50052'),
  /** Deadline of each call to identity and billing. */
  GRPC_DEADLINE_MS: z.coerce.number().int().min(100).default(10_000),
  GRPC_GATHER: GrpcGather,
  /** Email (`<DATA_DIR>/mail/`) and SMS (`SMS_PROVIDER`) channels invitations are delivered through. */
  ...MessagingConfig.shape,
  /** Base URL of the browser pages (the gateway's public address): invitation links `<base>/onboard?token=...`, checkout links `<base>/checkout?d=&s=`. */
  PUBLIC_BASE_URL: z.url().default('http://localhost:8080'),
  /** Lifetime of an invitation when the merchant gives no `expiresInDays`. */
  INVITATION_DEFAULT_EXPIRY_DAYS: z.coerce.number().int().min(1).max(90).default(DEFAULT_INVITATION_EXPIRY_DAYS),
  /**
   * How long a merchant's name read for invitation emails is reused, in ms: a renamed merchant's
   * new name is in the emails within this time. 0 turns the cache off.
   */
  CHECKOUT_MERCHANT_CACHE_MS: z.coerce.number().int().min(0).default(5_000),
  /**
   * How long one completion attempt holds its checkout session or onboarding wizard. Other
   * attempts meanwhile answer Pending (a session) or wait for it (a wizard); after it (the
   * attempt's process died half way) the next attempt re-runs the steps, which converge on what
   * the dead one created.
   */
  CHECKOUT_COMPLETION_LEASE_SECONDS: z.coerce.number().int().min(1).default(30),
  /**
   * How often the checkout service looks for completions whose attempt died half way (its lease
   * ran out: the process stopped between taking it and recording the outcome) and finishes them
   * itself, so a customer who does not press Subscribe again still ends Completed, with its
   * event. `0`: never (only the customer's retry finishes them).
   */
  CHECKOUT_RECOVERY_INTERVAL_MS: TimerMs(0).default(15_000),
  /**
   * Test only (ignored in production mode): a file naming a completion step (`after-customer`,
   * `after-enrolment`, and for an onboarding `onboarding-after-enrolment`); the next completion deletes it and kills its own process right after that
   * step (`after-customer`: once the account is there, while the enrolment in billing, asked for
   * at once with it, may be in flight). Billing's own steps: BILLING_FAULT_FILE.
   */
  CHECKOUT_FAULT_FILE: z.string().optional(),
});
export type CheckoutConfig = z.infer<typeof CheckoutConfig>;

export function loadConfig(env = process.env): CheckoutConfig {
  const config = parseConfig(CheckoutConfig, env);
  refuseWeakSecretsInProduction(config.PLATFORM_MODE, {}, { nats: config });
  return config;
}
