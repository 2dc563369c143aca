import type { MikroORM } from '@mikro-orm/postgresql';
import { addGrpcService, configureGrpcTransport, createGrpcServer, createLogger, listen, migrate, databaseOptions, openDatabase, shutdownServer, startOps, postgresDependency, natsDependency, grpcServiceDependency, type Logger } from '@billing/service-runtime';
import { observeGauge } from '@billing/telemetry';
import type { WebhooksConfig } from './config.js';
import { WEBHOOKS_CALLERS } from './grpc-callers.js';
import { AttemptRecorder } from './deliveries/attempt-recorder.js';
import { deliveriesGrpc } from './deliveries/deliveries-grpc.js';
import { AttemptSchema, DeliverySchema, ReplaySchema } from './deliveries/delivery.js';
import { Dispatcher } from './deliveries/dispatcher.js';
import { DueScheduler } from './deliveries/due-scheduler.js';
import { HttpSender } from './deliveries/http-sender.js';
import { pruneFinished } from './deliveries/retention.js';
import { RetryPolicy } from './deliveries/retry-policy.js';
import { EndpointSchema } from './endpoints/endpoint.js';
import { endpointsGrpc } from './endpoints/endpoints-grpc.js';
import { IdentityEndpointStates } from './endpoints/sync-endpoint.js';
import { EventConsumer, WEBHOOKS_CONSUMER } from './events/event-consumer.js';
import { MIGRATIONS } from './migrations/index.js';
import { SigningSecrets } from './signing/signing-secrets.js';

export const ENTITIES = [EndpointSchema, DeliverySchema, AttemptSchema, ReplaySchema];

export async function openWebhooksDatabase(config: WebhooksConfig, logger?: Logger): Promise<MikroORM> {
  return openDatabase({ ...databaseOptions(config), entities: ENTITIES, logger });
}

export interface WebhooksApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/**
 * Composition root of the webhooks service: the event consumer (inbox, endpoints read model,
 * deliveries), the dispatcher that signs and POSTs, the scheduler of retries and replays, and
 * the deliveries gRPC API, and the sync of one key's endpoint the gateway asks for after a change.
 */
export async function startWebhooks(config: WebhooksConfig): Promise<WebhooksApp> {
  const logger = createLogger('webhooks', config.LOG_LEVEL);
  configureGrpcTransport(config, config.WEBHOOKS_GRPC_ADDRESS, [config.IDENTITY_GRPC_URL]);
  const orm = await openWebhooksDatabase(config, logger);
  await migrate(orm, config.DB_SCHEMA, MIGRATIONS);

  const policy = new RetryPolicy(config.WEBHOOK_RETRY_SCHEDULE, config.WEBHOOK_RETRY_JITTER);
  const recorder = new AttemptRecorder(orm, policy, logger);
  const sender = new HttpSender({ timeoutMs: config.WEBHOOK_TIMEOUT_MS, production: config.PLATFORM_MODE === 'production' });
  const keys = new SigningSecrets(config.IDENTITY_GRPC_URL);
  const endpointStates = new IdentityEndpointStates(config.IDENTITY_GRPC_URL, { gather: config.GRPC_GATHER });
  const dispatcher = new Dispatcher(
    { sender, keys, recorder, logger },
    { global: config.WEBHOOK_CONCURRENCY, perEndpoint: config.WEBHOOK_ENDPOINT_CONCURRENCY, timeoutMs: config.WEBHOOK_TIMEOUT_MS },
  );
  const scheduler = new DueScheduler(orm, dispatcher, { pollMs: config.WEBHOOK_POLL_MS, leaseMs: config.WEBHOOK_LEASE_MS, perEndpoint: config.WEBHOOK_ENDPOINT_CONCURRENCY * 4 }, logger).start();
  dispatcher.onDrained = () => scheduler.nudge();
  const consumer = new EventConsumer(orm, dispatcher, { natsUrl: config.NATS_URL, leaseMs: config.WEBHOOK_LEASE_MS, ackWaitMs: config.WEBHOOK_ACK_WAIT_MS, endpointStates }, logger).start();
  observeGauge('nats.consumer.pending', '{message}', 'Messages of the webhooks JetStream consumer not yet delivered (state=pending) or not yet acked (state=ack_pending).', async () => {
    const p = await consumer.pending();
    return p && [
      { value: p.pending, attributes: { consumer: WEBHOOKS_CONSUMER, state: 'pending' } },
      { value: p.ackPending, attributes: { consumer: WEBHOOKS_CONSUMER, state: 'ack_pending' } },
    ];
  });
  const pruner = setInterval(() => {
    pruneFinished(orm, config.WEBHOOK_RETENTION_DAYS).catch((e) => logger.warn({ err: e }, 'pruning webhook deliveries failed'));
  }, 3600_000);
  pruner.unref();

  const { server, setServing } = createGrpcServer(WEBHOOKS_CALLERS);
  addGrpcService(server, 'webhooks.v1.WebhookDeliveries', logger, deliveriesGrpc(orm, scheduler));
  addGrpcService(server, 'webhooks.v1.WebhookEndpoints', logger, endpointsGrpc(orm, endpointStates, scheduler));
  const port = await listen(server, config.WEBHOOKS_GRPC_ADDRESS);
  const ops = await startOps({ host: config.METRICS_HOST, port: config.METRICS_PORT, logger, setServing, dependencies: [postgresDependency(orm), natsDependency(config.NATS_URL, 'webhooks'), grpcServiceDependency('identity', config.IDENTITY_GRPC_URL)] });
  logger.info({ port }, 'webhooks listening');

  return {
    port,
    logger,
    close: async () => {
      await ops.close();
      clearInterval(pruner);
      await shutdownServer(server);
      await consumer.stop();
      await scheduler.stop();
      await dispatcher.close(config.WEBHOOK_TIMEOUT_MS);
      await recorder.drain();
      sender.close();
      keys.close();
      endpointStates.close();
      await orm.close();
    },
  };
}
