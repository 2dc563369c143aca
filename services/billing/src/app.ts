import type { MikroORM } from '@mikro-orm/postgresql';
import { OutboxMessageSchema, addGrpcService, configureGrpcTransport, createGrpcServer, createLogger, listen, migrate, databaseOptions, openDatabase, openWithConfiguredKey, queryRows, SecretBox, shutdownServer, startOutboxRelay, startOps, postgresDependency, natsDependency, type Logger } from '@billing/service-runtime';
import { MemberAnswerSchema } from './answers/member-answer.js';
import { answersGrpc } from './answers/answers-grpc.js';
import type { BillingConfig } from './config.js';
import { BILLING_CALLERS } from './grpc-callers.js';
import { MerchantSchema } from './merchants/merchant.js';
import { merchantsGrpc } from './merchants/merchants-grpc.js';
import { MIGRATIONS } from './migrations/index.js';
import { MemberSchema } from './members/member.js';
import { membersGrpc } from './members/members-grpc.js';
import { PaymentMethodSchema } from './payment-methods/payment-method.js';
import { paymentMethodsGrpc } from './payment-methods/payment-methods-grpc.js';
import { PaymentProviders } from './payment-provider/payment-providers.js';
import { providerTokensGrpc } from './payment-provider/provider-tokens-grpc.js';
import { SandboxPaymentProvider } from './payment-provider/sandbox-payment-provider.js';
import { PlanSchema } from './plans/plan.js';
import { plansGrpc } from './plans/plans-grpc.js';
import { ProductSchema } from './products/product.js';
import { productsGrpc } from './products/products-grpc.js';
import { QuestionSchema } from './questions/question.js';
import { questionsGrpc } from './questions/questions-grpc.js';
import { SubscriptionSchema } from './subscriptions/subscription.js';
import { BillingRunner } from './billing-runs/billing-runner.js';
import { billingRunsGrpc } from './billing-runs/billing-runs-grpc.js';
import { FeeStatementSchema } from './fee-statements/fee-statement.js';
import { feeStatementsGrpc } from './fee-statements/fee-statements-grpc.js';
import { TransactionSchema } from './transactions/transaction.js';
import { transactionsGrpc } from './transactions/transactions-grpc.js';
import { enrolmentsGrpc, enrolmentWriters } from './enrolments/enrolments-grpc.js';
import { subscriptionsGrpc } from './subscriptions/subscriptions-grpc.js';

export const ENTITIES = [OutboxMessageSchema, MerchantSchema, ProductSchema, QuestionSchema, PlanSchema, MemberSchema, PaymentMethodSchema, SubscriptionSchema, MemberAnswerSchema, TransactionSchema, FeeStatementSchema];

export async function openBillingDatabase(config: BillingConfig, logger?: Logger): Promise<MikroORM> {
  return openDatabase({ ...databaseOptions(config), entities: ENTITIES, logger });
}

export interface BillingApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the billing service. */
export async function startBilling(config: BillingConfig): Promise<BillingApp> {
  const logger = createLogger('billing', config.LOG_LEVEL);
  configureGrpcTransport(config, config.BILLING_GRPC_ADDRESS);
  const orm = await openBillingDatabase(config, logger);
  await migrate(orm, config.DB_SCHEMA, MIGRATIONS);
  const box = new SecretBox(config.BILLING_ENCRYPTION_KEY, 'billing/payment-gateway-credentials');
  // A key other than the one the stored gateway credentials were sealed with would surface only
  // as a failed provider update much later: said now as a setting to fix (status 78).
  const [sealed] = await queryRows<{ value: string }>(orm.em.fork(), `select provider_credentials_sealed as value from merchants where provider_credentials_sealed is not null limit 1`);
  if (sealed) await openWithConfiguredKey('BILLING_ENCRYPTION_KEY', () => box.open(sealed.value), () => orm.close());

  const { server, setServing } = createGrpcServer(BILLING_CALLERS);
  addGrpcService(server, 'billing.v1.Merchants', logger, merchantsGrpc(orm, box));
  const sandbox = new SandboxPaymentProvider(config.PAYMENT_PROVIDER_URL, config.PAYMENT_PROVIDER_TIMEOUT_MS, config.PAYMENT_PROVIDER_MAX_SOCKETS);
  const providers = new PaymentProviders(sandbox);
  addGrpcService(server, 'billing.v1.Products', logger, productsGrpc(orm));
  addGrpcService(server, 'billing.v1.Questions', logger, questionsGrpc(orm));
  addGrpcService(server, 'billing.v1.Plans', logger, plansGrpc(orm));
  const writers = enrolmentWriters(orm);
  addGrpcService(server, 'billing.v1.Members', logger, membersGrpc(orm, writers.createMember));
  addGrpcService(server, 'billing.v1.PaymentMethods', logger, paymentMethodsGrpc(orm, providers, writers.append));
  addGrpcService(server, 'billing.v1.ProviderTokens', logger, providerTokensGrpc(orm, providers));
  addGrpcService(server, 'billing.v1.Subscriptions', logger, subscriptionsGrpc(orm, writers.subscriptions, { cancelWaitMs: config.BILLING_CANCEL_WAIT_MS }));
  const faultFile = config.PLATFORM_MODE === 'production' ? undefined : config.BILLING_FAULT_FILE;
  addGrpcService(server, 'billing.v1.Enrolments', logger, enrolmentsGrpc(orm, providers, writers, { faultFile, logger, claimWaitMs: config.BILLING_ENROL_WAIT_MS }));
  const runner = new BillingRunner(
    orm,
    providers,
    { chunkSize: config.BILLING_RUN_CHUNK_SIZE, workers: config.BILLING_RUN_WORKERS, concurrency: config.BILLING_RUN_CONCURRENCY, leaseMs: config.BILLING_CLAIM_LEASE_MS },
    logger,
    writers.subscriptions,
  );
  addGrpcService(server, 'billing.v1.BillingRuns', logger, billingRunsGrpc(runner));
  addGrpcService(server, 'billing.v1.Transactions', logger, transactionsGrpc(orm, providers, config.BILLING_CLAIM_LEASE_MS, config.BILLING_RUN_CONCURRENCY));
  addGrpcService(server, 'billing.v1.FeeStatements', logger, feeStatementsGrpc(orm));
  addGrpcService(server, 'billing.v1.Answers', logger, answersGrpc(orm));
  const relay = startOutboxRelay({ orm, schema: config.DB_SCHEMA, natsUrl: config.NATS_URL, logger, name: 'billing-outbox' });
  const port = await listen(server, config.BILLING_GRPC_ADDRESS);
  const ops = await startOps({ host: config.METRICS_HOST, port: config.METRICS_PORT, logger, setServing, dependencies: [postgresDependency(orm), natsDependency(config.NATS_URL, 'billing')] });
  logger.info({ port }, 'billing listening');
  runner.start(config.BILLING_RUN_INTERVAL_MS);

  return {
    port,
    logger,
    close: async () => {
      await ops.close();
      await runner.stop();
      await shutdownServer(server);
      await relay.stop();
      sandbox.close();
      await orm.close();
    },
  };
}
