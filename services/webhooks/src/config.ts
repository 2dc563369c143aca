import { z } from 'zod';
import { BaseConfig, parseConfig } from '@billing/service-runtime';

export const WebhooksConfig = BaseConfig.extend({
  DATABASE_URL: z.string().min(1, 'DATABASE_URL is required'),
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  WEBHOOKS_GRPC_ADDRESS: z.string().default('0.0.0.0:50054'),
  DB_SCHEMA: z.string().default('webhooks'),
});
export type WebhooksConfig = z.infer<typeof WebhooksConfig>;

export function loadConfig(env = process.env): WebhooksConfig {
  return parseConfig(WebhooksConfig, env);
}
