import { z } from 'zod';
import { BaseConfig, DatabaseUrl, DatabaseTuning, DbPoolMax, DEV_ENCRYPTION_KEY, FixedSchema, MessagingConfig, parseConfig, refuseWeakSecretsInProduction, NatsConfig } from '@billing/service-runtime';

export const IdentityConfig = BaseConfig.extend({
  DATABASE_URL: DatabaseUrl,
  ...NatsConfig.shape,
  IDENTITY_GRPC_ADDRESS: z.string().default('127.0.0.1:50051'),
  /** Key of the secrets identity keeps encrypted; its own, never another service's. Development default outside production. */
  IDENTITY_ENCRYPTION_KEY: z.string().min(32).default(DEV_ENCRYPTION_KEY),
  DB_SCHEMA: FixedSchema('identity'),
  DB_POOL_MAX: DbPoolMax,
  ...DatabaseTuning.shape,
  /** Email (`<DATA_DIR>/mail/`) and SMS (`SMS_PROVIDER`) delivery channels. */
  ...MessagingConfig.shape,
  /** Base URL of the links in customer emails (password reset, email verification). */
  PUBLIC_BASE_URL: z.url().default('http://localhost:8080'),
  /** Consecutive failed customer logins for one email from one client that lock them; 0 turns locking off. */
  CUSTOMER_LOCKOUT_THRESHOLD: z.coerce.number().int().min(0).default(5),
  /** How long the first lock lasts (each further lock of the same email and client doubles, up to a day). */
  CUSTOMER_LOCKOUT_SECONDS: z.coerce.number().int().min(1).default(900),
  /** As CUSTOMER_LOCKOUT_THRESHOLD, for merchant-user login. */
  MERCHANT_USER_LOCKOUT_THRESHOLD: z.coerce.number().int().min(0).default(5),
  /** As CUSTOMER_LOCKOUT_SECONDS, for merchant-user login. */
  MERCHANT_USER_LOCKOUT_SECONDS: z.coerce.number().int().min(1).default(900),
  /** Password hashes (scrypt, 128 MiB each) computed at once; more are refused with 503 and Retry-After rather than queued. 0: no bound. */
  PASSWORD_HASH_MAX_CONCURRENT: z.coerce.number().int().min(0).default(4),
  /** Password-reset emails sent per email per hour (forgot-password still answers 202); 0: no bound. */
  FORGOT_PASSWORD_PER_EMAIL_PER_HOUR: z.coerce.number().int().min(0).default(3),
});
export type IdentityConfig = z.infer<typeof IdentityConfig>;

export function loadConfig(env = process.env): IdentityConfig {
  const config = parseConfig(IdentityConfig, env);
  // As set (not the development default parsing filled in), so a missing key is named missing.
  refuseWeakSecretsInProduction(config.PLATFORM_MODE, { IDENTITY_ENCRYPTION_KEY: env.IDENTITY_ENCRYPTION_KEY }, { nats: config });
  return config;
}
