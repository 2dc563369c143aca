import type { MikroORM } from '@mikro-orm/postgresql';
import {
  addGrpcService,
  configureGrpcTransport,
  createDeliveryChannels,
  createGrpcServer,
  createLogger,
  listen,
  migrate,
  databaseOptions,
  openDatabase,
  OutboxMessageSchema,
  shutdownServer,
  startOutboxRelay,
  startOps,
  postgresDependency,
  natsDependency,
  grpcServiceDependency,
  faultInjector,
  type Logger,
} from '@billing/service-runtime';
import { createCheckoutBackends } from './backends.js';
import { checkoutGrpc } from './checkout-grpc.js';
import { SessionCompletion } from './completion/complete-session.js';
import { CompletionRecovery } from './completion/completion-recovery.js';
import type { CheckoutConfig } from './config.js';
import { CHECKOUT_CALLERS } from './grpc-callers.js';
import { InvitationSchema } from './invitations/invitation.js';
import { invitationsGrpc } from './invitations/invitations-grpc.js';
import { LinkSchema } from './links/link.js';
import { Links } from './links/links.js';
import { MIGRATIONS } from './migrations/index.js';
import { OnboardingSchema } from './onboarding/onboarding.js';
import { onboardingGrpc } from './onboarding/onboarding-grpc.js';
import { pagesGrpc } from './pages/pages-grpc.js';
import { BankTokenSchema } from './sessions/bank-token.js';
import { CheckoutSessionSchema } from './sessions/session.js';
import { Sessions } from './sessions/sessions.js';

export const ENTITIES = [OutboxMessageSchema, InvitationSchema, OnboardingSchema, LinkSchema, CheckoutSessionSchema, BankTokenSchema];

export async function openCheckoutDatabase(config: CheckoutConfig, logger?: Logger): Promise<MikroORM> {
  return openDatabase({ ...databaseOptions(config), entities: ENTITIES, logger });
}

export interface CheckoutApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/**
 * Composition root of the checkout service: the acquisition flows (invitations and onboarding,
 * hosted checkout links, sessions and completion) and the browser pages.
 */
export async function startCheckout(config: CheckoutConfig): Promise<CheckoutApp> {
  const logger = createLogger('checkout', config.LOG_LEVEL);
  configureGrpcTransport(config, config.CHECKOUT_GRPC_ADDRESS, [config.IDENTITY_GRPC_URL, config.BILLING_GRPC_URL]);
  const orm = await openCheckoutDatabase(config, logger);
  await migrate(orm, config.DB_SCHEMA, MIGRATIONS);
  const backends = createCheckoutBackends(config);
  const production = config.PLATFORM_MODE === 'production';

  const links = new Links(orm, backends, { publicBaseUrl: config.PUBLIC_BASE_URL, production });
  const sessions = new Sessions(orm, backends);
  const completion = new SessionCompletion(orm, backends, {
    leaseSeconds: config.CHECKOUT_COMPLETION_LEASE_SECONDS,
    faultFile: production ? undefined : config.CHECKOUT_FAULT_FILE,
    logger,
  });

  const { server, setServing } = createGrpcServer(CHECKOUT_CALLERS);
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
      merchantNameCacheMs: config.CHECKOUT_MERCHANT_CACHE_MS,
      logger,
    }),
  );
  const wizards = {
    orm,
    backends,
    completionLeaseSeconds: config.CHECKOUT_COMPLETION_LEASE_SECONDS,
    fault: faultInjector(production ? undefined : config.CHECKOUT_FAULT_FILE, logger, 'an onboarding completion'),
  };
  addGrpcService(server, 'checkout.v1.Onboarding', logger, onboardingGrpc(wizards));
  addGrpcService(server, 'checkout.v1.Checkout', logger, checkoutGrpc(links, sessions, completion));
  addGrpcService(server, 'checkout.v1.Pages', logger, pagesGrpc());
  const relay = startOutboxRelay({ orm, schema: config.DB_SCHEMA, natsUrl: config.NATS_URL, logger, name: 'checkout-outbox' });
  const recovery = new CompletionRecovery(orm, completion, wizards, logger).start(config.CHECKOUT_RECOVERY_INTERVAL_MS);
  const port = await listen(server, config.CHECKOUT_GRPC_ADDRESS);
  const ops = await startOps({ host: config.METRICS_HOST, port: config.METRICS_PORT, logger, setServing, dependencies: [postgresDependency(orm), natsDependency(config.NATS_URL, 'checkout'), grpcServiceDependency('identity', config.IDENTITY_GRPC_URL), grpcServiceDependency('billing', config.BILLING_GRPC_URL)] });
  logger.info({ port }, 'checkout listening');
  return {
    port,
    logger,
    close: async () => {
      await ops.close();
      await shutdownServer(server);
      await recovery.stop();
      await relay.stop();
      backends.close();
      await orm.close();
    },
  };
}
