import type { MikroORM } from '@mikro-orm/postgresql';
import { OutboxMessageSchema, createGrpcServer, createLogger, listen, migrate, openDatabase, SecretBox, serviceDefinition, shutdownServer, unaryHandlers, type Logger } from '@billing/service-runtime';
import { ApiKeySchema } from './api-keys/api-key.js';
import { apiKeysGrpc } from './api-keys/api-keys-grpc.js';
import type { IdentityConfig } from './config.js';
import { CredentialChangeSchema } from './credential-changes/credential-change.js';
import { credentialsGrpc } from './credential-changes/credentials-grpc.js';
import { MerchantUserSchema } from './merchant-users/merchant-user.js';
import { merchantUsersGrpc } from './merchant-users/merchant-users-grpc.js';
import { MIGRATIONS } from './migrations/index.js';
import { PasswordHasher } from './passwords/password-hasher.js';
import { SigningKeySchema } from './signing-keys/signing-key.js';
import { TokenIssuer } from './signing-keys/token-issuer.js';

export const ENTITIES = [OutboxMessageSchema, SigningKeySchema, MerchantUserSchema, ApiKeySchema, CredentialChangeSchema];

export async function openIdentityDatabase(config: IdentityConfig): Promise<MikroORM> {
  return openDatabase({ url: config.DATABASE_URL, schema: config.DB_SCHEMA, entities: ENTITIES, migrations: MIGRATIONS });
}

export interface IdentityApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the identity service. */
export async function startIdentity(config: IdentityConfig): Promise<IdentityApp> {
  const logger = createLogger('identity', config.LOG_LEVEL);
  const orm = await openIdentityDatabase(config);
  await migrate(orm, config.DB_SCHEMA);

  const box = new SecretBox(config.ENCRYPTION_KEY);
  const hasher = new PasswordHasher();
  const issuer = new TokenIssuer(box);
  await issuer.load(orm.em.fork());

  const { server } = createGrpcServer();
  const proto = (file: string, name: string) => serviceDefinition(`identity/v1/${file}`, name).service;
  server.addService(proto('merchant_users.proto', 'identity.v1.MerchantUsers'), unaryHandlers('identity.MerchantUsers', logger, merchantUsersGrpc(orm, hasher, issuer)));
  server.addService(proto('api_keys.proto', 'identity.v1.ApiKeys'), unaryHandlers('identity.ApiKeys', logger, apiKeysGrpc(orm, box, { production: config.PLATFORM_MODE === 'production' })));
  server.addService(proto('credentials.proto', 'identity.v1.Credentials'), unaryHandlers('identity.Credentials', logger, credentialsGrpc(orm, issuer)));
  const port = await listen(server, config.IDENTITY_GRPC_ADDRESS);
  logger.info({ port }, 'identity listening');

  return {
    port,
    logger,
    close: async () => {
      await shutdownServer(server);
      await orm.close();
    },
  };
}
