import { z } from 'zod';
import { DEFAULT_INVITATION_EXPIRY_DAYS } from '@billing/contracts';
import { BaseConfig, MessagingConfig, parseConfig } from '@billing/service-runtime';

export const CheckoutConfig = BaseConfig.extend({
  DATABASE_URL: z.string().min(1, 'DATABASE_URL is required'),
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  CHECKOUT_GRPC_ADDRESS: z.string().default('0.0.0.0:50053'),
  DB_SCHEMA: z.string().default('checkout'),
  IDENTITY_GRPC_URL: z.string().default('127.0.0.1:50051'),
  BILLING_GRPC_URL: z.string().default('127.0.0.1:50052'),
  /** Deadline of each call to identity and billing. */
  GRPC_DEADLINE_MS: z.coerce.number().int().min(100).default(10_000),
  /** Email (`<DATA_DIR>/mail/`) and SMS (`SMS_PROVIDER`) channels invitations are delivered through. */
  ...MessagingConfig.shape,
  /** Base URL of the links in invitations (`<PUBLIC_BASE_URL>/onboard?token=...`). */
  PUBLIC_BASE_URL: z.url().default('http://localhost:8080'),
  /** Lifetime of an invitation when the merchant gives no `expiresInDays`. */
  INVITATION_DEFAULT_EXPIRY_DAYS: z.coerce.number().int().min(1).max(90).default(DEFAULT_INVITATION_EXPIRY_DAYS),
});
export type CheckoutConfig = z.infer<typeof CheckoutConfig>;

export function loadConfig(env = process.env): CheckoutConfig {
  return parseConfig(CheckoutConfig, env);
}
