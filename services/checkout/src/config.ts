import { z } from 'zod';
import { BaseConfig, parseConfig } from '@billing/service-runtime';

export const CheckoutConfig = BaseConfig.extend({
  DATABASE_URL: z.string().min(1, 'DATABASE_URL is required'),
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  CHECKOUT_GRPC_ADDRESS: z.string().default('127.0.0.1:50053'),
  DB_SCHEMA: z.string().default('checkout'),
});
export type CheckoutConfig = z.infer<typeof CheckoutConfig>;

export function loadConfig(env = process.env): CheckoutConfig {
  return parseConfig(CheckoutConfig, env);
}
