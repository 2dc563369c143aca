import { z } from 'zod';
import { BaseConfig, DatabaseUrl, DatabaseTuning, FixedSchema, TimerMs, GrpcGather, parseConfig, NatsConfig, refuseWeakSecretsInProduction } from '@billing/service-runtime';

/** Comma-separated seconds, e.g. `5,300,1800`: the delay before each retry after the first attempt. */
const RetrySchedule = z
  .string()
  .trim()
  .regex(/^\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*$/, 'must be comma-separated seconds, e.g. 5,300,1800')
  .transform((s) => s.split(',').map((v) => Math.round(Number(v) * 1000)));

export const WebhooksConfig = BaseConfig.extend({
  DATABASE_URL: DatabaseUrl,
  ...NatsConfig.shape,
  WEBHOOKS_GRPC_ADDRESS: z.string().default('127.0.0.1:50054'),
  /** Identity, which answers the signing secret of a key. */
  IDENTITY_GRPC_URL: z.string().default('127.0.0.1:50051'),
  /** Whether the endpoint-state reads of one event-loop turn go to identity as one gathered call. */
  GRPC_GATHER: GrpcGather,
  DB_SCHEMA: FixedSchema('webhooks'),
  DB_POOL_MAX: z.coerce.number().int().min(2).default(10),
  ...DatabaseTuning.shape,
  /** Delays before the retries, in seconds; after the last one fails the delivery is Failed. */
  WEBHOOK_RETRY_SCHEDULE: RetrySchedule.default(RetrySchedule.parse('5,300,1800,7200,18000,36000,36000')),
  /** Each retry delay is spread by up to ± this fraction, so retries of one outage do not arrive at once. */
  WEBHOOK_RETRY_JITTER: z.coerce.number().min(0).max(0.5).default(0.1),
  /** A 2xx within this many milliseconds is success; anything slower is a failed attempt. */
  WEBHOOK_TIMEOUT_MS: TimerMs(100).default(15_000),
  /** Requests in flight at once, over all endpoints. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).default(256),
  /** Requests in flight at once to one endpoint (API key), so a slow receiver cannot take the whole pool. */
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).default(32),
  /** How often the database is polled for due retries and replays (new events are sent at once). */
  WEBHOOK_POLL_MS: z.coerce.number().int().min(10).default(1000),
  /** How long a replica owns a delivery it took; after that another replica may take it. */
  WEBHOOK_LEASE_MS: z.coerce.number().int().min(1000).default(60_000),
  /** JetStream redelivers an event this long after it was handed out unacknowledged (e.g. to a replica that died). */
  WEBHOOK_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(30_000),
  /** Finished deliveries (and their attempts and events) are deleted after this many days. */
  WEBHOOK_RETENTION_DAYS: z.coerce.number().min(1).default(30),
});
export type WebhooksConfig = z.infer<typeof WebhooksConfig>;

export function loadConfig(env = process.env): WebhooksConfig {
  const config = parseConfig(WebhooksConfig, env);
  refuseWeakSecretsInProduction(config.PLATFORM_MODE, {}, { nats: config });
  if (config.WEBHOOK_LEASE_MS < config.WEBHOOK_TIMEOUT_MS * 2) {
    process.stderr.write('Invalid configuration: WEBHOOK_LEASE_MS must be at least twice WEBHOOK_TIMEOUT_MS\n');
    process.exit(78);
  }
  return config;
}
