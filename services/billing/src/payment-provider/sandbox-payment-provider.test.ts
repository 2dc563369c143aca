import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { ProviderRejected } from './payment-provider.js';
import { SandboxPaymentProvider } from './sandbox-payment-provider.js';

/** A provider answering every call with the HTTP status named after the `:` of its account header. */
let server: http.Server;
let provider: SandboxPaymentProvider;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const status = Number(String(req.headers['sandbox-account']).split(':')[1]);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `code_${status}` }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  provider = new SandboxPaymentProvider(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 2000);
});

afterAll(async () => {
  provider.close();
  await new Promise((resolve) => server.close(resolve));
});

const charge = (status: number) =>
  provider.charge({ account: `m:${status}`, idempotencyKey: 'k', amountMinor: 100, currency: 'AUD', instrument: { token: 'ctok_x', type: 'Card', last4: '4242' } });
const refund = (status: number) => provider.refund({ account: `m:${status}`, idempotencyKey: 'k', providerChargeId: 'ch_x', amountMinor: 100, currency: 'AUD' });

describe('SandboxPaymentProvider answers', () => {
  it.each([400, 402, 403, 404, 422])('a definitive %i refuses a charge or refund for good', async (status) => {
    for (const call of [charge, refund]) {
      const e = await call(status).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(ProviderRejected);
      expect(e).toMatchObject({ httpStatus: status, providerCode: `code_${status}` });
    }
  });

  it.each([408, 409, 425, 429, 500, 503])('%i leaves the outcome unknown (provider_unavailable)', async (status) => {
    for (const call of [charge, refund]) {
      const e = await call(status).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(DomainError);
      expect((e as DomainError).code).toBe('provider_unavailable');
    }
  });

  it('keeps settling a charge the provider does not know an unknown outcome', async () => {
    const e = await provider.settle('m:404', 'ch_x').catch((err: unknown) => err);
    expect((e as DomainError).code).toBe('provider_unavailable');
  });
});
