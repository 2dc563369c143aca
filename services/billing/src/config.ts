import { z } from 'zod';
import { BaseConfig, parseConfig, requireInProduction } from '@billing/service-runtime';

const DEV_ENCRYPTION_KEY = 'development-only-encryption-key-do-not-use-in-production';

export const BillingConfig = BaseConfig.extend({
  DATABASE_URL: z.string().min(1, 'DATABASE_URL is required'),
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  BILLING_GRPC_ADDRESS: z.string().default('0.0.0.0:50052'),
  ENCRYPTION_KEY: z.string().min(32).default(DEV_ENCRYPTION_KEY),
  DB_SCHEMA: z.string().default('billing'),
  DB_POOL_MAX: z.coerce.number().int().min(1).default(10),
  /** Base URL of the sandbox payment provider (Staging merchants). */
  PAYMENT_PROVIDER_URL: z.url().default('http://127.0.0.1:8090'),
  /** Timeout of each payment-provider call; past it the call is provider_unavailable (502). */
  PAYMENT_PROVIDER_TIMEOUT_MS: z.coerce.number().int().min(100).default(3000),
});
export type BillingConfig = z.infer<typeof BillingConfig>;

export function loadConfig(env = process.env): BillingConfig {
  const config = parseConfig(BillingConfig, env);
  requireInProduction(config.PLATFORM_MODE, { ENCRYPTION_KEY: env.ENCRYPTION_KEY });
  return config;
}
