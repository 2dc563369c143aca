import type { MikroORM } from '@mikro-orm/postgresql';
import {
  addGrpcService,
  createDeliveryChannels,
  createGrpcServer,
  createLogger,
  listen,
  migrate,
  openDatabase,
  OutboxMessageSchema,
  shutdownServer,
  startOutboxRelay,
  type Logger,
} from '@billing/service-runtime';
import { createCheckoutBackends } from './backends.js';
import type { CheckoutConfig } from './config.js';
import { InvitationSchema } from './invitations/invitation.js';
import { invitationsGrpc } from './invitations/invitations-grpc.js';
import { MIGRATIONS } from './migrations/index.js';
import { OnboardingSchema } from './onboarding/onboarding.js';
import { onboardingGrpc } from './onboarding/onboarding-grpc.js';

export const ENTITIES = [OutboxMessageSchema, InvitationSchema, OnboardingSchema];

export async function openCheckoutDatabase(config: CheckoutConfig): Promise<MikroORM> {
  return openDatabase({ url: config.DATABASE_URL, schema: config.DB_SCHEMA, entities: ENTITIES, migrations: MIGRATIONS });
}

export interface CheckoutApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the checkout service: acquisition flows (invitations and onboarding). */
export async function startCheckout(config: CheckoutConfig): Promise<CheckoutApp> {
  const logger = createLogger('checkout', config.LOG_LEVEL);
  const orm = await openCheckoutDatabase(config);
  await migrate(orm, config.DB_SCHEMA);
  const backends = createCheckoutBackends(config);

  const { server } = createGrpcServer();
  addGrpcService(
    server,
    'checkout.v1.Invitations',
    logger,
    invitationsGrpc({
      orm,
      backends,
      channels: createDeliveryChannels(config),
      publicBaseUrl: config.PUBLIC_BASE_URL,
      defaultExpiryDays: config.INVITATION_DEFAULT_EXPIRY_DAYS,
      logger,
    }),
  );
  addGrpcService(server, 'checkout.v1.Onboarding', logger, onboardingGrpc({ orm, backends }));
  const relay = startOutboxRelay({ orm, schema: config.DB_SCHEMA, natsUrl: config.NATS_URL, logger, name: 'checkout-outbox' });
  const port = await listen(server, config.CHECKOUT_GRPC_ADDRESS);
  logger.info({ port }, 'checkout listening');
  return {
    port,
    logger,
    close: async () => {
      await shutdownServer(server);
      await relay.stop();
      backends.close();
      await orm.close();
    },
  };
}
