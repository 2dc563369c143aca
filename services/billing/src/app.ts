import type { MikroORM } from '@mikro-orm/postgresql';
import { OutboxMessageSchema, createGrpcServer, createLogger, listen, migrate, openDatabase, SecretBox, serviceDefinition, shutdownServer, startOutboxRelay, unaryHandlers, type Logger } from '@billing/service-runtime';
import type { BillingConfig } from './config.js';
import { MerchantSchema } from './merchants/merchant.js';
import { merchantsGrpc } from './merchants/merchants-grpc.js';
import { MIGRATIONS } from './migrations/index.js';

export const ENTITIES = [OutboxMessageSchema, MerchantSchema];

export async function openBillingDatabase(config: BillingConfig): Promise<MikroORM> {
  return openDatabase({ url: config.DATABASE_URL, schema: config.DB_SCHEMA, entities: ENTITIES, migrations: MIGRATIONS, poolMax: config.DB_POOL_MAX });
}

export interface BillingApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the billing service. */
export async function startBilling(config: BillingConfig): Promise<BillingApp> {
  const logger = createLogger('billing', config.LOG_LEVEL);
  const orm = await openBillingDatabase(config);
  await migrate(orm, config.DB_SCHEMA);
  const box = new SecretBox(config.ENCRYPTION_KEY);

  const { server } = createGrpcServer();
  const proto = (file: string, name: string) => serviceDefinition(`billing/v1/${file}`, name).service;
  server.addService(proto('merchants.proto', 'billing.v1.Merchants'), unaryHandlers('billing.Merchants', logger, merchantsGrpc(orm, box)));
  const relay = startOutboxRelay({ orm, schema: config.DB_SCHEMA, natsUrl: config.NATS_URL, logger, name: 'billing-outbox' });
  const port = await listen(server, config.BILLING_GRPC_ADDRESS);
  logger.info({ port }, 'billing listening');

  return {
    port,
    logger,
    close: async () => {
      await shutdownServer(server);
      await relay.stop();
      await orm.close();
    },
  };
}
