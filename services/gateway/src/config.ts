import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { BaseConfig, DatabaseUrl, DatabaseTuning, DbPoolMax, FixedSchema, TimerMs, GrpcGather, parseConfig, refuseWeakSecretsInProduction, NatsConfig } from '@billing/service-runtime';

export const GatewayConfig = BaseConfig.extend({
  /** Address of the public HTTP listener: loopback like every service unless told otherwise (`0.0.0.0` in a container). */
  HOST: z.string().default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Platform admin bearer token; in production required, 32 random bytes (hex or base64). */
  BILLING_ADMIN_TOKEN: z.string().min(32, 'BILLING_ADMIN_TOKEN must be at least 32 characters').optional(),
  IDENTITY_GRPC_URL: z.string().default('127.0.0.1:50051'),
  BILLING_GRPC_URL: z.string().default('127.0.0.1:50052'),
  CHECKOUT_GRPC_URL: z.string().default('127.0.0.1:50053'),
  WEBHOOKS_GRPC_URL: z.string().default('127.0.0.1:50054'),
  DATABASE_URL: DatabaseUrl,
  DB_SCHEMA: FixedSchema('gateway'),
  DB_POOL_MAX: DbPoolMax,
  ...DatabaseTuning.shape,
  ...NatsConfig.shape,
  /** Deadline of every forwarded gRPC call. */
  GRPC_DEADLINE_MS: z.coerce.number().int().min(100).default(5000),
  /** Deadline of the forwarded calls that hash a password (sign-in, sign-up, reset, merchant-user create). */
  PASSWORD_DEADLINE_MS: z.coerce.number().int().min(100).default(15_000),
  GRPC_GATHER: GrpcGather,
  /** Deadline of POST /api/admin/billing-runs (one run charges everything due). */
  BILLING_RUN_DEADLINE_MS: z.coerce.number().int().min(1000).default(600_000),
  /** How often the gateway polls identity's credential-change feed (revocations reach every replica within this). */
  CREDENTIAL_FEED_POLL_MS: z.coerce.number().int().min(50).default(250),
  /** Upper bound on how long an authenticated API key is trusted without asking identity again. */
  API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).default(60_000),
  /** How often `lastUsedAt` is written back, batched. */
  API_KEY_USAGE_FLUSH_MS: z.coerce.number().int().min(100).default(5_000),
  /** Proxies whose X-Forwarded-For is believed: "true", a hop count, or comma-separated addresses/CIDRs. Default: none. */
  TRUST_PROXY: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' || v === 'false' ? false : v === 'true' ? true : /^\d+$/.test(v) ? Number(v) : v)),
  /** Milliseconds a client has to send a whole request (header section and body); past it 408. 0: no limit. */
  HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(0).default(30_000),
  /** Milliseconds a client has to send the header section (at most HTTP_REQUEST_TIMEOUT_MS); past it 408. */
  HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** Milliseconds an idle kept-alive connection stays open (fastify's 72 s by default: above common load balancers' 60 s idle timeout). */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(1).default(72_000),
  /**
   * Connections one client address (an IPv6 /64) may hold open at once; more are answered 429
   * and closed. 0: no cap. Absent: 256, or no cap with TRUST_PROXY set (every connection then
   * comes from the proxy).
   */
  HTTP_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(0).optional(),
  /** Arrays and objects a JSON request body may nest, the body itself the first; deeper is 400. */
  BODY_MAX_DEPTH: z.coerce.number().int().min(2).max(1000).default(32),
  /** Base URL the gateway is reachable at, used in Location headers and links. */
  PUBLIC_BASE_URL: z.string().optional(),
  /** How long an Idempotency-Key is kept; after it the key may be reused (contract: 24 h). */
  IDEMPOTENCY_RETENTION_HOURS: z.coerce.number().positive().default(24),
  /** An idempotent request still in flight after this is presumed lost (its gateway died): outcome unknown. */
  IDEMPOTENCY_LEASE_SECONDS: z.coerce.number().positive().default(60),
  /** How often expired idempotency records are deleted; at most 2^31-1 ms (a timer given more fires every millisecond). */
  IDEMPOTENCY_CLEANUP_INTERVAL_MS: TimerMs(1000).default(600_000),
  /** Requests per second per credential (per client IP when anonymous); 0 turns rate limiting off. */
  RATE_LIMIT_PER_SECOND: z.coerce.number().min(0).default(100),
  /** Requests a credential may send at once on top of the steady rate (the bucket size). */
  RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(200),
  /** Requests per second per client IP, counted before authentication; 0 turns it off. */
  RATE_LIMIT_IP_PER_SECOND: z.coerce.number().min(0).default(300),
  /** Bucket size of the per-client-IP limit. */
  RATE_LIMIT_IP_BURST: z.coerce.number().int().min(1).default(600),
  /** Failed authentications per client IP per minute (as a bucket of that size refilled over a minute); 0 turns it off. */
  AUTH_FAILURE_LIMIT_PER_MINUTE: z.coerce.number().min(0).default(30),
  /** Requests per minute per client IP to the password endpoints (logins, signup, reset); 0 turns it off. */
  PASSWORD_LIMIT_IP_PER_MINUTE: z.coerce.number().min(0).default(20),
  /** Requests per minute per account (email, or reset token) to the password endpoints; 0 turns it off. */
  PASSWORD_LIMIT_ACCOUNT_PER_MINUTE: z.coerce.number().min(0).default(10),
  /** How often each replica reconciles its buckets with the shared ones in NATS KV. */
  RATE_LIMIT_SYNC_MS: z.coerce.number().int().min(10).default(100),
  /** NATS KV bucket holding the shared buckets; replicas that share limits use the same one. */
  RATE_LIMIT_KV_BUCKET: z.string().regex(/^[-\w]+$/, 'letters, digits, - and _ only').default('gateway_rate_limits'),
});
export type GatewayConfig = z.infer<typeof GatewayConfig> & { BILLING_ADMIN_TOKEN: string };

export function loadConfig(env = process.env): GatewayConfig {
  const config = parseConfig(GatewayConfig, env);
  refuseWeakSecretsInProduction(config.PLATFORM_MODE, { BILLING_ADMIN_TOKEN: config.BILLING_ADMIN_TOKEN }, { nats: config });
  if (!config.BILLING_ADMIN_TOKEN) {
    // Development or test only (production refused above). Not printed: logs never hold secrets.
    config.BILLING_ADMIN_TOKEN = randomBytes(32).toString('base64url');
    process.stdout.write('BILLING_ADMIN_TOKEN not set: the admin API is closed (a random token nobody knows); set it to use the admin API\n');
  }
  return config as GatewayConfig;
}
