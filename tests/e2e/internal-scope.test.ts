import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SERVICE_FILES } from '@billing/proto-types';
import { grpc, serviceDefinition } from '@billing/service-runtime';
import { createMember, setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient } from '../support/fixtures.js';
import '../support/e2e.js';

// Internal calls used to mean "every merchant" when their merchant_id was left empty, so a
// caller that forgot the field (or a bug that dropped it) read or changed any merchant's data.
// Every internal request now names its scope (common.v1.Scope): a call without one, or with an
// empty merchant id, is refused with INVALID_ARGUMENT (bad_request) and answers no data; a
// merchant scope never reaches another merchant's rows. The calls are made with the real
// caller's certificate, so only the scope is missing.

const certs = inject('grpcCertsDir');
const pem = (file: string) => readFileSync(join(certs, file));
const clients: grpc.Client[] = [];

type Outcome = { code: grpc.status; errorCode?: string; reply?: unknown };

/** Calls `service/method` on its owner as `caller` (the certificate a real caller holds). */
function call(owner: string, service: keyof typeof SERVICE_FILES, method: string, request: object, caller = 'gateway'): Promise<Outcome> {
  const Client = serviceDefinition(SERVICE_FILES[service], service);
  const credentials = grpc.credentials.createSsl(pem('ca.crt'), pem(`${caller}.key`), pem(`${caller}.crt`));
  const client = new Client(inject('grpcAddresses')[owner]!, credentials, { 'grpc.ssl_target_name_override': owner }) as grpc.Client & Record<string, Function>;
  clients.push(client);
  return new Promise((resolve) =>
    client[method]!(request, new grpc.Metadata(), { deadline: new Date(Date.now() + 5000) }, (err: grpc.ServiceError | null, reply: unknown) =>
      resolve(err ? { code: err.code, errorCode: err.metadata?.get('error-code')[0]?.toString() } : { code: grpc.status.OK, reply }),
    ),
  );
}

const refused = (o: Outcome) => {
  expect(o.reply).toBeUndefined();
  expect({ code: grpc.status[o.code], errorCode: o.errorCode }).toEqual({ code: 'INVALID_ARGUMENT', errorCode: 'bad_request' });
};

const unscoped = [{}, { scope: { merchantId: '' } }, { scope: {} }];
const merchantScope = (m: { id: string }) => ({ scope: { merchantId: m.id } });
const PLATFORM = { scope: { platform: {} } };

afterAll(() => clients.forEach((c) => c.close()));

describe('billing refuses internal calls that name no scope', () => {
  let a: TestMerchant;
  let b: TestMerchant;
  let memberOfA: { id: string };

  beforeAll(async () => {
    const api = apiClient(inject('gatewayUrl'));
    [a, b] = await Promise.all([setUpMerchant(api, inject('adminToken')), setUpMerchant(api, inject('adminToken'))]);
    memberOfA = await createMember(api, a);
  });

  it.each(unscoped)('lists nothing without a scope (%j)', async (scope) => {
    refused(await call('billing', 'billing.v1.Members', 'ListMembers', { ...scope, page: 1, pageSize: 50 }));
    refused(await call('billing', 'billing.v1.Products', 'ListProducts', { ...scope, page: 1, pageSize: 50 }));
    refused(await call('billing', 'billing.v1.Plans', 'ListPlans', { ...scope, page: 1, pageSize: 50 }));
    refused(await call('billing', 'billing.v1.Subscriptions', 'ListSubscriptions', { ...scope, page: 1, pageSize: 50 }));
    refused(await call('billing', 'billing.v1.PaymentMethods', 'ListPaymentMethods', { ...scope, memberId: memberOfA.id }));
    refused(await call('billing', 'billing.v1.Questions', 'ListQuestions', { ...scope, productId: a.productId }));
  });

  it.each(unscoped)('reads and changes nothing by id without a scope (%j)', async (scope) => {
    refused(await call('billing', 'billing.v1.Members', 'GetMember', { ...scope, id: memberOfA.id }));
    refused(await call('billing', 'billing.v1.Products', 'GetProduct', { ...scope, id: a.productId }));
    refused(await call('billing', 'billing.v1.Plans', 'GetPlan', { ...scope, id: a.planId }));
    refused(await call('billing', 'billing.v1.Plans', 'UpdatePlan', { ...scope, id: a.planId, name: 'Hijacked' }));
    refused(await call('billing', 'billing.v1.Merchants', 'GetMerchant', { ...scope, id: a.id }));
    refused(await call('billing', 'billing.v1.Members', 'CreateMember', { ...scope, email: `${randomUUID()}@example.com`, firstName: 'No', lastName: 'Scope' }));
    refused(await call('billing', 'billing.v1.PaymentMethods', 'AddPaymentMethod', { ...scope, memberId: memberOfA.id, type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2099 }));
    refused(await call('billing', 'billing.v1.Subscriptions', 'CreateSubscription', { ...scope, memberId: memberOfA.id, planId: a.planId }));
    const plan = await call('billing', 'billing.v1.Plans', 'GetPlan', { ...merchantScope(a), id: a.planId });
    expect((plan.reply as { name: string }).name).toBe('Monthly');
  });

  it("refuses checkout's certificate without a scope too", async () => {
    refused(await call('billing', 'billing.v1.Plans', 'GetPlan', { id: a.planId }, 'checkout'));
    const customer = { email: `${randomUUID()}@example.com`, firstName: 'No', lastName: 'Scope' };
    refused(await call('billing', 'billing.v1.Enrolments', 'Enrol', { ...customer, providerToken: 'tok', planId: a.planId }, 'checkout'));
    // Checkout enrols customers through Enrol alone: the single writes are the gateway's.
    expect((await call('billing', 'billing.v1.Members', 'CreateMember', { ...merchantScope(a), ...customer }, 'checkout')).code).toBe(grpc.status.PERMISSION_DENIED);
  });

  it("a merchant scope does not reach another merchant's resources", async () => {
    expect((await call('billing', 'billing.v1.Members', 'GetMember', { ...merchantScope(b), id: memberOfA.id })).code).toBe(grpc.status.NOT_FOUND);
    expect((await call('billing', 'billing.v1.Plans', 'GetPlan', { ...merchantScope(b), id: a.planId })).code).toBe(grpc.status.NOT_FOUND);
    expect((await call('billing', 'billing.v1.PaymentMethods', 'ListPaymentMethods', { ...merchantScope(b), memberId: memberOfA.id })).code).toBe(grpc.status.NOT_FOUND);
    expect((await call('billing', 'billing.v1.Merchants', 'GetMerchant', { ...merchantScope(b), id: a.id })).code).toBe(grpc.status.NOT_FOUND);
    const listed = await call('billing', 'billing.v1.Members', 'ListMembers', { ...merchantScope(b), page: 1, pageSize: 50 });
    expect((listed.reply as { items: { id: string }[] }).items.map((m) => m.id)).not.toContain(memberOfA.id);
  });

  it('the platform scope reads by id, but never lists "every merchant" or acts as a merchant', async () => {
    expect((await call('billing', 'billing.v1.Members', 'GetMember', { ...PLATFORM, id: memberOfA.id })).code).toBe(grpc.status.OK);
    refused(await call('billing', 'billing.v1.Members', 'ListMembers', { ...PLATFORM, page: 1, pageSize: 50 }));
    refused(await call('billing', 'billing.v1.Members', 'CreateMember', { ...PLATFORM, email: `${randomUUID()}@example.com`, firstName: 'No', lastName: 'Merchant' }));
    expect((await call('billing', 'billing.v1.Merchants', 'ListMerchants', { ...merchantScope(a), page: 1, pageSize: 50 })).code).toBe(grpc.status.PERMISSION_DENIED);
  });
});

describe('checkout refuses internal calls that name no scope', () => {
  it.each(unscoped)('invitations and sessions (%j)', async (scope) => {
    const merchantId = randomUUID();
    refused(await call('checkout', 'checkout.v1.Invitations', 'ListInvitations', { ...scope, merchantId, page: 1, pageSize: 50 }));
    refused(await call('checkout', 'checkout.v1.Invitations', 'GetInvitation', { ...scope, id: randomUUID() }));
    refused(await call('checkout', 'checkout.v1.Checkout', 'GetSession', { ...scope, sessionId: randomUUID() }));
  });
});

describe('identity refuses internal calls that name no scope', () => {
  let a: TestMerchant;
  let b: TestMerchant;
  let keyOfA: string;

  beforeAll(async () => {
    const api = apiClient(inject('gatewayUrl'));
    [a, b] = await Promise.all([setUpMerchant(api, inject('adminToken')), setUpMerchant(api, inject('adminToken'))]);
    const keys = await call('identity', 'identity.v1.ApiKeys', 'ListApiKeys', { ...merchantScope(a), page: 1, pageSize: 50 });
    keyOfA = (keys.reply as { items: { id: string }[] }).items[0]!.id;
  });

  it.each(unscoped)('API keys, merchant users and checkout tokens (%j)', async (scope) => {
    refused(await call('identity', 'identity.v1.ApiKeys', 'ListApiKeys', { ...scope, page: 1, pageSize: 50 }));
    refused(await call('identity', 'identity.v1.ApiKeys', 'GetApiKey', { ...scope, id: keyOfA }));
    refused(await call('identity', 'identity.v1.ApiKeys', 'RevokeApiKey', { ...scope, id: keyOfA }));
    refused(await call('identity', 'identity.v1.ApiKeys', 'UpdateWebhook', { ...scope, id: keyOfA, webhookEnabled: false }));
    refused(await call('identity', 'identity.v1.ApiKeys', 'CreateApiKey', { ...scope, name: 'no scope' }));
    refused(await call('identity', 'identity.v1.MerchantUsers', 'UpdateMerchantUser', { ...scope, userId: randomUUID(), isActive: false }));
    refused(await call('identity', 'identity.v1.CheckoutTokens', 'IssueCheckoutToken', { ...scope, sessionId: randomUUID() }, 'checkout'));
    refused(await call('identity', 'identity.v1.WebhookSigning', 'GetSigningSecret', { ...scope, apiKeyId: keyOfA }, 'webhooks'));
    refused(await call('identity', 'identity.v1.ApiKeyEndpoints', 'GetApiKeyEndpointState', { ...scope, apiKeyId: keyOfA }, 'webhooks'));
    const key = await call('identity', 'identity.v1.ApiKeys', 'GetApiKey', { ...merchantScope(a), id: keyOfA });
    const { id, revokedAt } = key.reply as { id: string; revokedAt?: string };
    expect({ id, revoked: Boolean(revokedAt) }).toEqual({ id: keyOfA, revoked: false });
  });

  it("a merchant scope does not reach another merchant's key; the platform does not list every merchant's", async () => {
    expect((await call('identity', 'identity.v1.ApiKeys', 'GetApiKey', { ...merchantScope(b), id: keyOfA })).code).toBe(grpc.status.NOT_FOUND);
    expect((await call('identity', 'identity.v1.ApiKeys', 'RevokeApiKey', { ...merchantScope(b), id: keyOfA })).code).toBe(grpc.status.NOT_FOUND);
    expect((await call('identity', 'identity.v1.WebhookSigning', 'GetSigningSecret', { ...merchantScope(b), apiKeyId: keyOfA }, 'webhooks')).code).toBe(grpc.status.NOT_FOUND);
    expect((await call('identity', 'identity.v1.WebhookSigning', 'GetSigningSecret', { ...merchantScope(a), apiKeyId: keyOfA }, 'webhooks')).code).toBe(grpc.status.OK);
    refused(await call('identity', 'identity.v1.ApiKeys', 'ListApiKeys', { ...PLATFORM, page: 1, pageSize: 50 }));
    expect((await call('identity', 'identity.v1.ApiKeys', 'GetApiKey', { ...PLATFORM, id: keyOfA })).code).toBe(grpc.status.OK);
  });

  it("a key's endpoint state: its own merchant's scope or the platform, for the webhooks service alone", async () => {
    expect((await call('identity', 'identity.v1.ApiKeyEndpoints', 'GetApiKeyEndpointState', { ...merchantScope(b), apiKeyId: keyOfA }, 'webhooks')).code).toBe(grpc.status.NOT_FOUND);
    const own = await call('identity', 'identity.v1.ApiKeyEndpoints', 'GetApiKeyEndpointState', { ...merchantScope(a), apiKeyId: keyOfA }, 'webhooks');
    expect(own.reply).toMatchObject({ apiKeyId: keyOfA, merchantId: a.id, revoked: false });
    expect((own.reply as { version: number }).version).toBeGreaterThanOrEqual(1);
    expect((await call('identity', 'identity.v1.ApiKeyEndpoints', 'GetApiKeyEndpointState', { ...PLATFORM, apiKeyId: keyOfA }, 'webhooks')).code).toBe(grpc.status.OK);
    expect((await call('identity', 'identity.v1.ApiKeyEndpoints', 'GetApiKeyEndpointState', { ...merchantScope(a), apiKeyId: keyOfA }, 'gateway')).code).toBe(grpc.status.PERMISSION_DENIED);
    expect((await call('identity', 'identity.v1.ApiKeyEndpoints', 'GetApiKeyEndpointState', { ...merchantScope(a), apiKeyId: keyOfA }, 'checkout')).code).toBe(grpc.status.PERMISSION_DENIED);
  });
});

describe('webhooks refuses internal calls that name no scope', () => {
  it.each(unscoped)('deliveries (%j)', async (scope) => {
    refused(await call('webhooks', 'webhooks.v1.WebhookDeliveries', 'ListDeliveries', { ...scope, page: 1, pageSize: 50 }));
    refused(await call('webhooks', 'webhooks.v1.WebhookDeliveries', 'GetDelivery', { ...scope, id: randomUUID() }));
    refused(await call('webhooks', 'webhooks.v1.WebhookDeliveries', 'ReplayDelivery', { ...scope, id: randomUUID() }));
    refused(await call('webhooks', 'webhooks.v1.WebhookEndpoints', 'SyncEndpoint', { ...scope, apiKeyId: randomUUID() }));
  });

  it('syncs an endpoint for the gateway alone, and a merchant scope does not reach another merchant\'s key', async () => {
    const api = apiClient(inject('gatewayUrl'));
    const [a, b] = await Promise.all([setUpMerchant(api, inject('adminToken')), setUpMerchant(api, inject('adminToken'))]);
    const keys = await call('identity', 'identity.v1.ApiKeys', 'ListApiKeys', { ...merchantScope(a), page: 1, pageSize: 50 });
    const keyOfA = (keys.reply as { items: { id: string }[] }).items[0]!.id;
    expect((await call('webhooks', 'webhooks.v1.WebhookEndpoints', 'SyncEndpoint', { ...merchantScope(b), apiKeyId: keyOfA })).code).toBe(grpc.status.NOT_FOUND);
    const synced = await call('webhooks', 'webhooks.v1.WebhookEndpoints', 'SyncEndpoint', { ...merchantScope(a), apiKeyId: keyOfA });
    expect(synced.code).toBe(grpc.status.OK);
    expect((synced.reply as { version: number }).version).toBeGreaterThanOrEqual(1);
    expect((await call('webhooks', 'webhooks.v1.WebhookEndpoints', 'SyncEndpoint', { ...merchantScope(a), apiKeyId: keyOfA }, 'billing')).code).toBe(grpc.status.PERMISSION_DENIED);
    expect((await call('webhooks', 'webhooks.v1.WebhookEndpoints', 'SyncEndpoint', { ...merchantScope(a), apiKeyId: keyOfA }, 'checkout')).code).toBe(grpc.status.PERMISSION_DENIED);
  });

  it('the platform scope does not list every merchant\'s deliveries', async () => {
    refused(await call('webhooks', 'webhooks.v1.WebhookDeliveries', 'ListDeliveries', { ...PLATFORM, page: 1, pageSize: 50 }));
  });
});
