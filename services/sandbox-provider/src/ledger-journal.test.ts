import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildSandbox, type SandboxApp } from './app.js';
import { SandboxConfig } from './config.js';
import { Ledger } from './ledger.js';

const config = SandboxConfig.parse({ PLATFORM_MODE: 'test', LOG_LEVEL: 'silent' });
const dir = await mkdtemp(join(tmpdir(), 'sandbox-ledger-'));
const file = join(dir, 'sandbox', 'ledger.jsonl');
afterAll(() => rm(dir, { recursive: true, force: true }));

const failures: unknown[] = [];
async function start(): Promise<SandboxApp & { entries: number; skipped: number }> {
  const { ledger, entries, skipped } = await Ledger.open(file, (e) => failures.push(e));
  return { ...buildSandbox(config, ledger), entries, skipped };
}
async function stop(s: SandboxApp) {
  await s.app.close();
  await s.ledger.close();
}

const headers = (key?: string) => ({ 'sandbox-account': 'm1', ...(key ? { 'idempotency-key': key } : {}) });

describe('the ledger kept in a file', () => {
  it('is read back after a restart: tokens still charge, a Processing charge still settles, repeats are answered as before, refunds stay bounded', async () => {
    const first = await start();
    const inject = first.app.inject.bind(first.app);
    const bank = (await inject({ method: 'POST', url: '/v1/bank-tokens', headers: headers(), payload: { accountName: 'A Person', bsb: '062-000', accountNumber: '12345678' } })).json();
    const card = (await inject({ method: 'POST', url: '/v1/card-tokens', headers: headers(), payload: { number: '4242424242424242', expiryMonth: 12, expiryYear: 2099 } })).json();
    const processing = await inject({ method: 'POST', url: '/v1/charges', headers: headers('k-bank'), payload: { amountMinor: 5000, currency: 'AUD', paymentMethod: { token: bank.token } } });
    expect(processing.json()).toMatchObject({ status: 'Processing' });
    const settled = (await inject({ method: 'POST', url: '/v1/charges', headers: headers('k-card'), payload: { amountMinor: 2000, currency: 'AUD', paymentMethod: { token: card.token } } })).json();
    expect(settled).toMatchObject({ status: 'Settled' });
    expect((await inject({ method: 'POST', url: '/v1/refunds', headers: headers('r-1'), payload: { chargeId: settled.id, amountMinor: 1500 } })).statusCode).toBe(201);
    await stop(first);

    const second = await start();
    const again = second.app.inject.bind(second.app);
    // Two tokens, two charges, the refund and three kept answers: one line each after the rewrite.
    expect(second).toMatchObject({ entries: expect.any(Number), skipped: 0 });
    expect((await readFile(file, 'utf8')).trim().split('\n')).toHaveLength(8);
    expect((await again({ method: 'GET', url: `/v1/tokens/${card.token}`, headers: headers() })).statusCode).toBe(200);
    const repeat = await again({ method: 'POST', url: '/v1/charges', headers: headers('k-bank'), payload: { amountMinor: 5000, currency: 'AUD', paymentMethod: { token: bank.token } } });
    expect(repeat.headers['idempotent-replayed']).toBe('true');
    expect(repeat.json().id).toBe(processing.json().id);
    expect((await again({ method: 'POST', url: `/v1/charges/${processing.json().id}/settle`, headers: headers() })).json()).toMatchObject({ status: 'Settled' });
    expect((await again({ method: 'POST', url: '/v1/refunds', headers: headers('r-2'), payload: { chargeId: settled.id, amountMinor: 501 } })).json()).toMatchObject({ error: 'refund_exceeds_charge' });
    const fresh = await again({ method: 'POST', url: '/v1/charges', headers: headers('k-card-2'), payload: { amountMinor: 700, currency: 'AUD', paymentMethod: { token: card.token } } });
    expect(fresh.json()).toMatchObject({ status: 'Settled' });
    const { charges, refunds } = (await again({ method: 'GET', url: '/__sandbox/ledger?account=m1' })).json();
    expect(charges.map((c: { id: string; status: string }) => [c.id, c.status])).toEqual([
      [processing.json().id, 'Settled'],
      [settled.id, 'Settled'],
      [fresh.json().id, 'Settled'],
    ]);
    expect(refunds).toHaveLength(1);
    await stop(second);
    expect(failures).toEqual([]);
  });

  it('skips a line torn by a crash mid-write and keeps the rest', async () => {
    await appendFile(file, '{"charge":{"id":"ch_torn","amou');
    const third = await start();
    expect(third.skipped).toBe(1);
    expect((await third.app.inject({ method: 'GET', url: '/__sandbox/ledger?account=m1' })).json().charges).toHaveLength(3);
    expect(await readFile(file, 'utf8')).not.toContain('ch_torn');
    await stop(third);
  });

  it('answers each of many concurrent requests only once its entries are in the file', async () => {
    const fourth = await start();
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => fourth.app.inject({ method: 'POST', url: '/v1/charges', headers: headers(`many-${i}`), payload: { amountMinor: 100 + i, currency: 'AUD', paymentMethod: { type: 'Card', last4: '4242' } } })),
    );
    const text = await readFile(file, 'utf8');
    for (const a of answers) expect(text).toContain(a.json().id);
    await stop(fourth);
  });
});
