import { afterAll, describe, expect, it } from 'vitest';
import { buildSandbox } from './app.js';
import { SandboxConfig } from './config.js';

const sandbox = buildSandbox(SandboxConfig.parse({ PLATFORM_MODE: 'test', LOG_LEVEL: 'silent' }));
const { app } = sandbox;
afterAll(() => app.close());

const account = (id: string) => ({ 'sandbox-account': id });

async function charge(acct: string, key: string, paymentMethod: Record<string, unknown>, amountMinor = 1995) {
  return app.inject({ method: 'POST', url: '/v1/charges', headers: { ...account(acct), 'idempotency-key': key }, payload: { amountMinor, currency: 'AUD', paymentMethod } });
}

describe('tokens', () => {
  it('tokenises bank details, keeping only last4, BSB and name, visible to its own account only', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/bank-tokens', headers: account('m1'), payload: { accountName: 'A Person', bsb: '062000', accountNumber: '12345678' } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toMatchObject({ type: 'BankAccount', last4: '5678', bsb: '062-000', accountName: 'A Person' });
    expect(body.token).toMatch(/^btok_/);
    expect(JSON.stringify(body)).not.toContain('12345678');
    expect((await app.inject({ method: 'GET', url: `/v1/tokens/${body.token}`, headers: account('m1') })).json()).toMatchObject({ last4: '5678' });
    expect((await app.inject({ method: 'GET', url: `/v1/tokens/${body.token}`, headers: account('m2') })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/v1/tokens/btok_unknown', headers: account('m1') })).statusCode).toBe(404);
  });

  it('refuses malformed bank details', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/bank-tokens', payload: { accountName: 'A', bsb: '12', accountNumber: '12' } });
    expect(res.statusCode).toBe(400);
    expect(Object.keys(res.json().errors).sort()).toEqual(['accountNumber', 'bsb']);
  });

  it('tokenises cards with a brand from the number', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/card-tokens', payload: { number: '4000000000000002', expiryMonth: 12, expiryYear: 2099 } });
    expect(res.json()).toMatchObject({ type: 'Card', brand: 'Visa', last4: '0002', expiryMonth: 12, expiryYear: 2099 });
  });
});

describe('charges', () => {
  it('declines card 0002 and settles other cards at once', async () => {
    expect((await charge('m1', 'k-decline', { type: 'Card', last4: '0002' })).json()).toMatchObject({ status: 'Failed', failureReason: 'card_declined' });
    expect((await charge('m1', 'k-ok', { type: 'Card', last4: '4242' })).json()).toMatchObject({ status: 'Settled', failureReason: null });
  });

  it('leaves bank charges Processing; settling fails accounts ending 002', async () => {
    const ok = (await charge('m1', 'k-bank-ok', { type: 'BankAccount', last4: '1234' })).json();
    const poor = (await charge('m1', 'k-bank-poor', { type: 'BankAccount', last4: '5002' })).json();
    expect([ok.status, poor.status]).toEqual(['Processing', 'Processing']);
    expect((await app.inject({ method: 'POST', url: `/v1/charges/${ok.id}/settle`, headers: account('m1') })).json()).toMatchObject({ status: 'Settled' });
    expect((await app.inject({ method: 'POST', url: `/v1/charges/${poor.id}/settle`, headers: account('m1') })).json()).toMatchObject({ status: 'Failed', failureReason: 'insufficient_funds' });
  });

  it('charges once per Idempotency-Key and refuses the key with a different request', async () => {
    const first = await charge('m1', 'k-once', { type: 'Card', last4: '4242' });
    const again = await charge('m1', 'k-once', { type: 'Card', last4: '4242' });
    expect(again.json().id).toBe(first.json().id);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await charge('m1', 'k-once', { type: 'Card', last4: '4242' }, 500)).statusCode).toBe(409);
    expect((await app.inject({ method: 'POST', url: '/v1/charges', payload: { amountMinor: 1, currency: 'AUD', paymentMethod: { type: 'Card', last4: '4242' } } })).statusCode).toBe(400);
  });

  it('charges by token', async () => {
    const token = (await app.inject({ method: 'POST', url: '/v1/bank-tokens', headers: account('m3'), payload: { accountName: 'B', bsb: '062-000', accountNumber: '99990002' } })).json().token;
    expect((await charge('m3', 'k-token', { token })).json()).toMatchObject({ status: 'Processing', paymentMethod: { type: 'BankAccount', last4: '0002' } });
    expect((await charge('m4', 'k-token', { token })).statusCode).toBe(400);
  });

  it('refunds settled charges up to the charged amount', async () => {
    const c = (await charge('m1', 'k-refundable', { type: 'Card', last4: '4242' }, 1000)).json();
    const refund = (amountMinor: number, key: string) => app.inject({ method: 'POST', url: '/v1/refunds', headers: { ...account('m1'), 'idempotency-key': key }, payload: { chargeId: c.id, amountMinor } });
    expect((await refund(600, 'r1')).statusCode).toBe(201);
    expect((await refund(600, 'r1')).json().amountMinor).toBe(600); // replay, not a second refund
    expect((await refund(500, 'r2')).statusCode).toBe(409);
    expect((await refund(400, 'r3')).statusCode).toBe(201);
  });
});

describe('faults', () => {
  it('takes the API down for one account only, and back up', async () => {
    expect((await app.inject({ method: 'POST', url: '/__sandbox/faults', payload: { down: true, account: 'm-down' } })).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/v1/tokens/x', headers: account('m-down') })).statusCode).toBe(503);
    expect((await app.inject({ method: 'GET', url: '/v1/tokens/x', headers: account('m-up') })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    await app.inject({ method: 'DELETE', url: '/__sandbox/faults?account=m-down' });
    expect((await app.inject({ method: 'GET', url: '/v1/tokens/x', headers: account('m-down') })).statusCode).toBe(404);
  });
});

describe('the unauthenticated /__sandbox endpoints', () => {
  it('are refused in production mode: SANDBOX_FAULTS_ENABLED=true does not start', () => {
    const refused = SandboxConfig.safeParse({ PLATFORM_MODE: 'production', SANDBOX_FAULTS_ENABLED: 'true' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['SANDBOX_FAULTS_ENABLED']);
  });

  it.each([
    [{ PLATFORM_MODE: 'production' }, 404],
    [{ PLATFORM_MODE: 'production', SANDBOX_FAULTS_ENABLED: 'false' }, 404],
    [{ PLATFORM_MODE: 'test', SANDBOX_FAULTS_ENABLED: 'false' }, 404],
    [{ PLATFORM_MODE: 'development' }, 200],
  ])('with %o answer %i', async (env, status) => {
    const { app: other } = buildSandbox(SandboxConfig.parse({ ...env, LOG_LEVEL: 'silent' }));
    try {
      expect((await other.inject({ method: 'GET', url: '/__sandbox/faults' })).statusCode).toBe(status);
      expect((await other.inject({ method: 'POST', url: '/__sandbox/faults', payload: { down: true } })).statusCode).toBe(status);
    } finally {
      await other.close();
    }
  });
});

describe('SANDBOX_BODY_LIMIT_BYTES', () => {
  it('answers 413 to a body over the configured limit (64 KiB was fixed in code)', async () => {
    const small = buildSandbox(SandboxConfig.parse({ PLATFORM_MODE: 'test', LOG_LEVEL: 'silent', SANDBOX_BODY_LIMIT_BYTES: '2048' }));
    try {
      const payload = { accountName: 'A Person'.padEnd(3000, 'x'), bsb: '062000', accountNumber: '12345678' };
      expect((await small.app.inject({ method: 'POST', url: '/v1/bank-tokens', headers: account('m1'), payload })).statusCode).toBe(413);
      expect((await app.inject({ method: 'POST', url: '/v1/bank-tokens', headers: account('m1'), payload })).statusCode).not.toBe(413);
    } finally {
      await small.app.close();
    }
  });
});
