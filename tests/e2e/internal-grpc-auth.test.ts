import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SERVICE_FILES } from '@billing/proto-types';
import { grpc, serviceDefinition } from '@billing/service-runtime';
import { apiClient, createApiKey, createMerchant } from '../support/fixtures.js';
import '../support/e2e.js';

// identity's WebhookSigning hands out a key's plaintext signing secret: before mutual TLS anyone
// who reached the port could read it by sending `x-internal-caller: webhooks` in metadata.
const address = inject('identityGrpcAddress');
const certs = inject('grpcCertsDir');
const pem = (file: string) => readFileSync(join(certs, file));
const WebhookSigning = serviceDefinition(SERVICE_FILES['identity.v1.WebhookSigning'], 'identity.v1.WebhookSigning');

/** A client with these credentials, expecting identity's certificate from the server (as the services do). */
function signingClient(credentials: grpc.ChannelCredentials) {
  return new WebhookSigning(address, credentials, { 'grpc.ssl_target_name_override': 'identity' }) as grpc.Client & Record<string, Function>;
}
const asService = (service: string) => grpc.credentials.createSsl(pem('ca.crt'), pem(`${service}.key`), pem(`${service}.crt`));

function getSigningSecret(client: grpc.Client & Record<string, Function>, key: { id: string; merchantId: string }, metadata = new grpc.Metadata()) {
  return new Promise<{ code: grpc.status; reply?: { signingSecret: string } }>((resolve) =>
    client.GetSigningSecret!({ scope: { merchantId: key.merchantId }, apiKeyId: key.id }, metadata, { deadline: new Date(Date.now() + 5000) }, (err: grpc.ServiceError | null, reply: { signingSecret: string }) =>
      resolve(err ? { code: err.code } : { code: grpc.status.OK, reply }),
    ),
  );
}

describe('identity gRPC answers only authenticated, authorised services', () => {
  let key: { id: string; merchantId: string; signingSecret: string };
  const clients: grpc.Client[] = [];
  const client = (credentials: grpc.ChannelCredentials) => {
    const c = signingClient(credentials);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    const api = apiClient(inject('gatewayUrl'));
    const merchant = await createMerchant(api, inject('adminToken'));
    key = { ...(await createApiKey(api, inject('adminToken'), merchant.id)), merchantId: merchant.id };
  });
  afterAll(() => clients.forEach((c) => c.close()));

  it('refuses a plaintext call, even one naming itself webhooks in metadata', async () => {
    const md = new grpc.Metadata();
    md.set('x-internal-caller', 'webhooks');
    const res = await getSigningSecret(client(grpc.credentials.createInsecure()), key, md);
    expect(res.code).toBe(grpc.status.UNAVAILABLE);
    expect(res.reply).toBeUndefined();
  });

  it('refuses a TLS call without a client certificate', async () => {
    const res = await getSigningSecret(client(grpc.credentials.createSsl(pem('ca.crt'))), key);
    expect(res.code).not.toBe(grpc.status.OK);
    expect(res.reply).toBeUndefined();
  });

  it("refuses billing's certificate for WebhookSigning.GetSigningSecret, whatever its metadata says", async () => {
    const md = new grpc.Metadata();
    md.set('x-internal-caller', 'webhooks');
    const res = await getSigningSecret(client(asService('billing')), key, md);
    expect(res.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(res.reply).toBeUndefined();
  });

  it("refuses the gateway's certificate for WebhookSigning.GetSigningSecret", async () => {
    expect((await getSigningSecret(client(asService('gateway')), key)).code).toBe(grpc.status.PERMISSION_DENIED);
  });

  it("answers the webhooks service's certificate with the key's signing secret", async () => {
    const res = await getSigningSecret(client(asService('webhooks')), key);
    expect(res.code).toBe(grpc.status.OK);
    expect(res.reply?.signingSecret).toBe(key.signingSecret);
  });
});
