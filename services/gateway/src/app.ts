import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { MikroORM } from '@mikro-orm/postgresql';
import { configureGrpcTransport, createLogger, migrate, databaseOptions, openDatabase, grpcServiceDependency, natsDependency, postgresDependency, startOps, type Logger } from '@billing/service-runtime';
import { apiKeyRoutes } from './api-keys/api-key-routes.js';
import { MerchantAccess } from './auth/access.js';
import { ApiKeyCache } from './auth/api-key-cache.js';
import { Authenticator } from './auth/authenticator.js';
import { CredentialFeed } from './auth/credential-feed.js';
import { JwtVerifier } from './auth/jwt-verifier.js';
import { createBackends, type Backends } from './backends/clients.js';
import { checkoutRoutes } from './checkout/checkout-routes.js';
import { customerRoutes } from './customers/customer-routes.js';
import type { GatewayConfig } from './config.js';
import { capConnectionsPerAddress, DEFAULT_MAX_CONNECTIONS_PER_IP } from './http/connection-cap.js';
import type { RouteSpec } from './http/route.js';
import { buildHttpServer, CLIENT_LIMITED, type RequestPipeline } from './http/server.js';
import { actingFor } from './idempotency/acting-for.js';
import { startExpiryJob } from './idempotency/expiry-job.js';
import { IdempotencyEngine } from './idempotency/idempotency-engine.js';
import { IdempotencyRecordSchema } from './idempotency/idempotency-record.js';
import { IdempotencyStore } from './idempotency/idempotency-store.js';
import { invitationRoutes } from './invitations/invitation-routes.js';
import { merchantRoutes } from './merchants/merchant-routes.js';
import { merchantUserRoutes } from './merchant-users/merchant-user-routes.js';
import { memberRoutes } from './members/member-routes.js';
import { onboardingRoutes } from './onboarding/onboarding-routes.js';
import { paymentMethodRoutes } from './payment-methods/payment-method-routes.js';
import { planRoutes } from './plans/plan-routes.js';
import { registerPages } from './pages/page-routes.js';
import { productRoutes } from './products/product-routes.js';
import { questionRoutes } from './questions/question-routes.js';
import { subscriptionRoutes } from './subscriptions/subscription-routes.js';
import { webhookDeliveryRoutes } from './webhook-deliveries/webhook-delivery-routes.js';
import { billingRunRoutes } from './billing-runs/billing-run-routes.js';
import { feeStatementRoutes } from './fee-statements/fee-statement-routes.js';
import { transactionRoutes } from './transactions/transaction-routes.js';
import { MIGRATIONS } from './migrations/index.js';
import { DOCS_CSP, DOCS_HTML, DOCS_SCRIPT_PATH, loadDocsScript } from './openapi/docs-page.js';
import { buildOpenApi } from './openapi/openapi.js';
import { GatewayLimits } from './rate-limit/gateway-limits.js';

export const ENTITIES = [IdempotencyRecordSchema];

/** The gateway's own schema: idempotency records. */
export async function openGatewayDatabase(config: GatewayConfig, logger?: Logger): Promise<MikroORM> {
  return openDatabase({ ...databaseOptions(config), entities: ENTITIES, logger });
}

export interface GatewayApp {
  app: FastifyInstance;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the gateway: credentials, cross-cutting pipeline, feature routes. */
export async function buildGateway(config: GatewayConfig): Promise<GatewayApp> {
  const logger = createLogger('gateway', config.LOG_LEVEL);
  configureGrpcTransport(config, undefined, [config.IDENTITY_GRPC_URL, config.BILLING_GRPC_URL, config.CHECKOUT_GRPC_URL, config.WEBHOOKS_GRPC_URL]);
  const orm = await openGatewayDatabase(config, logger);
  await migrate(orm, config.DB_SCHEMA, MIGRATIONS);
  const backends: Backends = createBackends(config);

  const feed = new CredentialFeed(backends.identity, logger, config.CREDENTIAL_FEED_POLL_MS);
  const apiKeys = new ApiKeyCache(backends.identity, feed, logger, config.API_KEY_CACHE_TTL_MS, config.API_KEY_USAGE_FLUSH_MS);
  const identityJwks = async () => ({ keys: JSON.parse((await backends.identity.credentials.GetJwks({})).keysJson) });
  const authenticator = new Authenticator(config.BILLING_ADMIN_TOKEN, apiKeys, feed, {
    merchantUser: new JwtVerifier('merchantUser', identityJwks, logger),
    customer: new JwtVerifier('customer', identityJwks, logger),
    checkout: new JwtVerifier('checkout', identityJwks, logger),
  });
  const access = new MerchantAccess(backends);

  const idempotencyStore = new IdempotencyStore(orm);
  const idempotency = new IdempotencyEngine(idempotencyStore, logger, {
    retentionMs: config.IDEMPOTENCY_RETENTION_HOURS * 3_600_000,
    leaseMs: config.IDEMPOTENCY_LEASE_SECONDS * 1000,
  });
  const limits = new GatewayLimits(config, logger);
  const pipeline: RequestPipeline = {
    admitClient: (request, reply) => limits.admitClient(request, reply),
    admit: (spec, request, reply) => limits.admit(spec, request, reply),
    failed: (request, error) => limits.requestFailed(request, error),
    succeeded: (request) => limits.requestSucceeded(request),
    beforeAuthentication: (request, reply) => limits.beforeAuthentication(request, reply),
    authenticationFailed: (request) => limits.authenticationFailed(request),
    limitRate: (request, principal, reply) => limits.limitCredential(request, principal, reply),
    runIdempotent: async (spec, request, principal, run) =>
      idempotency.run(
        {
          method: request.method,
          url: request.url,
          key: request.headers['idempotency-key'],
          rawBody: request.rawBody,
          principal,
          actingFor: await actingFor(spec, principal, request),
          traceId: request.traceId,
        },
        run,
      ),
  };
  const { app, register } = buildHttpServer({
    logger,
    authenticator,
    pipeline,
    trustProxy: config.TRUST_PROXY,
    bodyMaxDepth: config.BODY_MAX_DEPTH,
    requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
  });
  capConnectionsPerAddress(app.server, config.HTTP_MAX_CONNECTIONS_PER_IP ?? (config.TRUST_PROXY === false ? DEFAULT_MAX_CONNECTIONS_PER_IP : 0));

  const routes: RouteSpec[] = [
    ...merchantRoutes(backends),
    ...merchantUserRoutes(backends, access, feed),
    ...apiKeyRoutes(backends, access, feed, logger),
    ...customerRoutes(backends, feed),
    ...productRoutes(backends, access),
    ...questionRoutes(backends, access),
    ...planRoutes(backends, access),
    ...memberRoutes(backends, access),
    ...paymentMethodRoutes(backends, access),
    ...subscriptionRoutes(backends, access),
    ...webhookDeliveryRoutes(backends, access),
    ...transactionRoutes(backends, access),
    ...billingRunRoutes(backends),
    ...feeStatementRoutes(backends, access),
    ...checkoutRoutes(backends, access),
    ...invitationRoutes(backends, access),
    ...onboardingRoutes(backends),
  ];
  for (const r of routes) register(r);

  // Both built on the first request, not at start-up: the document and the reference's bundle
  // (3.5 MB) are memory every replica would otherwise hold for a page few of them ever serve.
  // Each is serialised and gzipped once, served gzipped to a client that takes it (about a sixth
  // of the bytes), and counted against the client's per-IP limit like an API request: half a
  // megabyte and 3.5 MB a request, unlimited, let one client fill the gateway's time (probe).
  const openapi = lazyDocument(() => Buffer.from(JSON.stringify(buildOpenApi(routes, '1.0.0'))));
  const docsScript = lazyDocument(loadDocsScript);
  app.get('/openapi.json', CLIENT_LIMITED, async (request, reply) => sendDocument(request, reply.type('application/json; charset=utf-8'), openapi));
  // Only the gateway's own script and the page's start, requests to the gateway alone, no framing
  // of the reference (clickjacking), no plugins, no base or form targets elsewhere (DOCS_CSP).
  app.get('/docs', CLIENT_LIMITED, async (_req, reply) => reply.type('text/html; charset=utf-8').header('content-security-policy', DOCS_CSP).send(DOCS_HTML));
  app.get(DOCS_SCRIPT_PATH, CLIENT_LIMITED, async (request, reply) =>
    sendDocument(request, reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600'), docsScript),
  );
  app.get('/health', async () => ({ status: 'ok' }));
  // Ready when its database, NATS and every backend are: an unready backend makes the gateway
  // unready too, so a load balancer sends its traffic elsewhere.
  const ops = await startOps({
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    logger,
    dependencies: [
      postgresDependency(orm),
      ...(config.RATE_LIMIT_PER_SECOND > 0 ? [natsDependency(config.NATS_URL, 'gateway')] : []),
      grpcServiceDependency('identity', config.IDENTITY_GRPC_URL),
      grpcServiceDependency('billing', config.BILLING_GRPC_URL),
      grpcServiceDependency('checkout', config.CHECKOUT_GRPC_URL),
      grpcServiceDependency('webhooks', config.WEBHOOKS_GRPC_URL),
    ],
  });
  app.get('/health/live', async () => ({ status: 'ok' }));
  // The public port says which dependency is down, not why: a probe's reason names internal
  // addresses and errors (`connect ECONNREFUSED 10.0.3.7:50052`), for anyone on the internet to
  // read. The operations listener (METRICS_HOST, loopback by default) gives the reasons.
  app.get('/health/ready', async (_req, reply) => {
    const report = await ops.readiness.evaluate();
    const checks = Object.fromEntries(Object.entries(report.checks).map(([name, result]) => [name, result === 'ok' ? 'ok' : 'unavailable']));
    return reply.code(report.status === 'ready' ? 200 : 503).send({ status: report.status, checks });
  });
  // Anonymous and a call to identity each: counted against the client's limit, as /openapi.json is.
  app.get('/.well-known/jwks.json', CLIENT_LIMITED, async () => identityJwks());
  registerPages(app, backends.checkout.pages, logger);

  await feed.start();
  apiKeys.start();
  limits.start();
  const idempotencyExpiry = startExpiryJob(idempotencyStore, logger, config.IDEMPOTENCY_CLEANUP_INTERVAL_MS);

  return {
    app,
    logger,
    close: async () => {
      await app.close();
      await ops.close();
      feed.stop();
      await apiKeys.stop();
      await limits.stop();
      await idempotencyExpiry.stop();
      backends.close();
      await orm.close();
    },
  };
}

/** A document built on first use, with its gzip. */
function lazyDocument(build: () => Buffer): () => { plain: Buffer; gzipped: Buffer } {
  let built: { plain: Buffer; gzipped: Buffer } | undefined;
  return () => {
    if (!built) {
      const plain = build();
      built = { plain, gzipped: gzipSync(plain) };
    }
    return built;
  };
}

function sendDocument(request: FastifyRequest, reply: FastifyReply, document: () => { plain: Buffer; gzipped: Buffer }) {
  const { plain, gzipped } = document();
  reply.header('vary', 'accept-encoding');
  return /\bgzip\b/i.test(request.headers['accept-encoding'] ?? '') ? reply.header('content-encoding', 'gzip').send(gzipped) : reply.send(plain);
}
