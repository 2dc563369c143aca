import type { MikroORM } from '@mikro-orm/postgresql';
import { OutboxMessageSchema, createDeliveryChannels, addGrpcService, configureGrpcTransport, createGrpcServer, createLogger, listen, migrate, databaseOptions, openDatabase, openWithConfiguredKey, SecretBox, shutdownServer, startOutboxRelay, startOps, postgresDependency, natsDependency, type Logger } from '@billing/service-runtime';
import { ApiKeySchema } from './api-keys/api-key.js';
import { apiKeysGrpc } from './api-keys/api-keys-grpc.js';
import { webhookSigningGrpc } from './api-keys/webhook-signing-grpc.js';
import { apiKeyEndpointsGrpc } from './api-keys/api-key-endpoints-grpc.js';
import { checkoutTokensGrpc } from './checkout-tokens/checkout-tokens-grpc.js';
import type { IdentityConfig } from './config.js';
import { IDENTITY_CALLERS } from './grpc-callers.js';
import { CredentialChangeSchema } from './credential-changes/credential-change.js';
import { credentialsGrpc } from './credential-changes/credentials-grpc.js';
import { CustomerAccountSchema } from './customers/customer-account.js';
import { CustomerTokenSchema } from './customers/customer-token.js';
import { customersGrpc } from './customers/customers-grpc.js';
import { startCustomerHousekeeping } from './customers/housekeeping.js';
import { LoginLockout } from './passwords/login-lockout.js';
import { ResetEmailThrottle } from './customers/reset-email-throttle.js';
import { MerchantUserSchema } from './merchant-users/merchant-user.js';
import { merchantUsersGrpc } from './merchant-users/merchant-users-grpc.js';
import { MIGRATIONS } from './migrations/index.js';
import { PasswordHasher } from './passwords/password-hasher.js';
import { SigningKeySchema } from './signing-keys/signing-key.js';
import { TokenIssuer } from './signing-keys/token-issuer.js';

export const ENTITIES = [OutboxMessageSchema, SigningKeySchema, MerchantUserSchema, ApiKeySchema, CredentialChangeSchema, CustomerAccountSchema, CustomerTokenSchema];

export async function openIdentityDatabase(config: IdentityConfig, logger?: Logger): Promise<MikroORM> {
  return openDatabase({ ...databaseOptions(config), entities: ENTITIES, logger });
}

export interface IdentityApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the identity service. */
export async function startIdentity(config: IdentityConfig): Promise<IdentityApp> {
  const logger = createLogger('identity', config.LOG_LEVEL);
  configureGrpcTransport(config, config.IDENTITY_GRPC_ADDRESS);
  const orm = await openIdentityDatabase(config, logger);
  await migrate(orm, config.DB_SCHEMA, MIGRATIONS);

  const box = new SecretBox(config.IDENTITY_ENCRYPTION_KEY, 'identity/api-key-signing-secrets');
  const hasher = new PasswordHasher(undefined, config.PASSWORD_HASH_MAX_CONCURRENT);
  const maxLockSeconds = 86_400;
  const issuer = new TokenIssuer(new SecretBox(config.IDENTITY_ENCRYPTION_KEY, 'identity/token-signing-keys'));
  // A key other than the one that sealed the token-signing keys is a setting to fix, said as one.
  await openWithConfiguredKey('IDENTITY_ENCRYPTION_KEY', () => issuer.load(orm.em.fork()), () => orm.close());

  const { server, setServing } = createGrpcServer(IDENTITY_CALLERS);
  addGrpcService(server, 'identity.v1.MerchantUsers', logger, merchantUsersGrpc(orm, hasher, issuer, new LoginLockout('merchant_user', { threshold: config.MERCHANT_USER_LOCKOUT_THRESHOLD, lockSeconds: config.MERCHANT_USER_LOCKOUT_SECONDS, maxLockSeconds })));
  addGrpcService(server, 'identity.v1.ApiKeys', logger, apiKeysGrpc(orm, box, { production: config.PLATFORM_MODE === 'production' }));
  const customers = customersGrpc({
    orm,
    hasher,
    issuer,
    lockout: new LoginLockout('customer', { threshold: config.CUSTOMER_LOCKOUT_THRESHOLD, lockSeconds: config.CUSTOMER_LOCKOUT_SECONDS, maxLockSeconds }),
    resetEmails: new ResetEmailThrottle(config.FORGOT_PASSWORD_PER_EMAIL_PER_HOUR),
    channels: createDeliveryChannels(config),
    publicBaseUrl: config.PUBLIC_BASE_URL,
    logger,
  });
  addGrpcService(server, 'identity.v1.Customers', logger, customers);
  const stopCustomerHousekeeping = startCustomerHousekeeping(orm, logger);
  addGrpcService(server, 'identity.v1.Credentials', logger, credentialsGrpc(orm, issuer));
  addGrpcService(server, 'identity.v1.WebhookSigning', logger, webhookSigningGrpc(orm, box));
  addGrpcService(server, 'identity.v1.ApiKeyEndpoints', logger, apiKeyEndpointsGrpc(orm));
  addGrpcService(server, 'identity.v1.CheckoutTokens', logger, checkoutTokensGrpc(issuer));
  const relay = startOutboxRelay({ orm, schema: config.DB_SCHEMA, natsUrl: config.NATS_URL, logger, name: 'identity-outbox' });
  const port = await listen(server, config.IDENTITY_GRPC_ADDRESS);
  const ops = await startOps({ host: config.METRICS_HOST, port: config.METRICS_PORT, logger, setServing, dependencies: [postgresDependency(orm), natsDependency(config.NATS_URL, 'identity')] });
  logger.info({ port }, 'identity listening');

  return {
    port,
    logger,
    close: async () => {
      await ops.close();
      await shutdownServer(server);
      stopCustomerHousekeeping();
      await relay.stop();
      await orm.close();
    },
  };
}
