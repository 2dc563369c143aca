import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { besideSharedPlatform } from '../support/e2e.js';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { apiClient, eventually, unique, type ApiClient } from '../support/fixtures.js';
import { messagesTo } from '../support/mailbox.js';

/**
 * `npm start`'s platform (development mode), every request from one client address, as an
 * integrator's test suite sends them: the abuse limits beyond the interface contract's are off
 * outside production mode (`scripts/lib/services.mjs`). The contract: per credential, and per
 * client IP on anonymous endpoints, 100 requests a second with a burst of 200 by default; 401
 * for a refused credential; a reset link for every forgot-password. A client well inside those
 * numbers is never 429. (Production mode keeps the limits; abuse-resistance.test.ts sets them.)
 */
const PASSWORD = 'correct-horse-42';

let platform: Awaited<ReturnType<typeof startPlatform>>;
let api: ApiClient;

beforeAll(async () => {
  platform = await startPlatform({
    ...besideSharedPlatform(),
    mode: 'development',
    services: ['identity', 'gateway'],
    serviceEnv: { gateway: { RATE_LIMIT_KV_BUCKET: `defaults_${randomBytes(4).toString('hex')}` } },
  });
  api = apiClient(platform.gatewayUrl!);
}, 120_000);

afterAll(async () => {
  await platform?.stop();
});

describe('npm start (development mode): the abuse limits stay within the contract', () => {
  it('one client signs up and signs in 30 customers in a row (anonymous password endpoints): none is 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) {
      const email = `${unique('many')}@example.com`;
      statuses.push((await api.post('/api/account/signup', { email, password: PASSWORD, firstName: 'M', lastName: 'N', dateOfBirth: '1990-01-01' })).status);
      statuses.push((await api.post('/api/account/login', { email, password: PASSWORD })).status);
    }
    expect(statuses).toEqual(Array(30).fill(200));
  });

  it('35 refused credentials from one client are each 401, and a valid credential from it is still served', async () => {
    const email = `${unique('auth')}@example.com`;
    const signup = await api.post('/api/account/signup', { email, password: PASSWORD, firstName: 'A', lastName: 'F', dateOfBirth: '1990-01-01' });
    expect(signup.status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 35; i++) statuses.push((await api.get('/api/account/me', { token: `sk_${randomBytes(32).toString('base64url')}` })).status);
    expect(statuses).toEqual(Array(35).fill(401));
    const me = await api.get('/api/account/me', { token: signup.body.token });
    expect(me.status).toBe(200);
    expect(me.body.email).toBe(email);
  });

  it('forgot-password sends a reset link on each of 4 requests for one email', async () => {
    const email = `${unique('forgot')}@example.com`;
    expect((await api.post('/api/account/signup', { email, password: PASSWORD, firstName: 'F', lastName: 'P', dateOfBirth: '1990-01-01' })).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const resets = async () => (await messagesTo(inject('dataDir'), email)).filter((m) => /reset-password/.test(m.text)).length;
    expect(await eventually(async () => (await resets()) >= 4, 5000, 100)).toBe(true);
  });
});
