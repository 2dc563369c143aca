import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { apiClient, createApiKey, createMerchant, createMerchantUser, eventually, unique, type ApiClient, type ApiResponse } from '../support/fixtures.js';
import { messagesTo } from '../support/mailbox.js';
import { startGatewayReplica, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * Issue 12 part 1, through the gateway. A platform of its own:
 * - identity (and billing, for merchants) with at most 1 password hash at a time and 2 reset emails per email per hour;
 * - `open`: a gateway with the limits off (test mode), for set-up and the lockout tests;
 * - `a` and `b`: two replicas with low limits sharing one NATS KV bucket.
 * Every gateway trusts X-Forwarded-For, so each test speaks from client addresses of its own.
 */
const LIMITS = {
  TRUST_PROXY: 'true',
  RATE_LIMIT_IP_PER_SECOND: '0.1',
  RATE_LIMIT_IP_BURST: '12',
  AUTH_FAILURE_LIMIT_PER_MINUTE: '4',
  PASSWORD_LIMIT_IP_PER_MINUTE: '5',
  PASSWORD_LIMIT_ACCOUNT_PER_MINUTE: '3',
  RATE_LIMIT_SYNC_MS: '50',
  RATE_LIMIT_KV_BUCKET: `abuse_${randomBytes(4).toString('hex')}`,
};
const PASSWORD = 'correct-horse-42';

let platform: TestPlatform;
let replicas: Awaited<ReturnType<typeof startPlatform>>[] = [];
let open: ApiClient;
let a: ApiClient;
let b: ApiClient;

let ipSeq = 0;
/** A client address of its own for one test (TEST-NET-2 range). */
const newClient = () => ({ 'x-forwarded-for': `198.51.100.${++ipSeq}` });

beforeAll(async () => {
  platform = await startTestPlatform({
    services: ['identity', 'billing', 'gateway'],
    serviceEnv: { identity: { PASSWORD_HASH_MAX_CONCURRENT: '1', FORGOT_PASSWORD_PER_EMAIL_PER_HOUR: '2' }, gateway: { TRUST_PROXY: 'true' } },
  });
  open = apiClient(platform.gatewayUrl!);
  const [second, third] = await Promise.all([startGatewayReplica(platform, LIMITS), startGatewayReplica(platform, LIMITS)]);
  replicas = [second, third];
  a = apiClient(second.gatewayUrl!);
  b = apiClient(third.gatewayUrl!);
}, 120_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await platform?.stop();
});

async function signUp(email = `${unique('abuse')}@example.com`): Promise<{ email: string; token: string }> {
  const res = await open.post('/api/account/signup', { email, password: PASSWORD, firstName: 'A', lastName: 'B', dateOfBirth: '1990-01-01' }, { headers: newClient() });
  if (res.status !== 200) throw new Error(`signup: ${res.status} ${JSON.stringify(res.body)}`);
  return { email, token: res.body.token };
}

/** Sends alternately through replica a and b, one after another. */
async function alternately(n: number, send: (c: ApiClient) => Promise<ApiResponse>): Promise<ApiResponse[]> {
  const out: ApiResponse[] = [];
  for (let i = 0; i < n; i++) out.push(await send(i % 2 === 0 ? a : b));
  return out;
}

function expectLimited(res: ApiResponse, policy: string) {
  expect(res.status).toBe(429);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  expect(res.headers.get('ratelimit-policy')).toContain(`"${policy}";q=`);
  expect(res.headers.get('ratelimit')).toMatch(new RegExp(`"${policy}";r=0;t=\\d+`));
}

describe('a per-client-IP limit before authentication, shared by the replicas', () => {
  it('admits one burst across both replicas together, then answers 429 on both, whatever the credential', async () => {
    const client = newClient();
    const first = await a.get('/api/Merchants/me', { headers: client });
    expect(first.status).toBe(401);
    // Every limited response says which limits it was counted against and what is left.
    expect(first.headers.get('ratelimit-policy')).toBe('"ip";q=12;w=120');
    expect(first.headers.get('ratelimit')).toMatch(/^"ip";r=11;t=\d+$/);
    // Each replica alone would admit 12 (24 together); shared, the two admit about 12 together
    // (a replica may overshoot by what it admits while a sync is in flight, more on a loaded host).
    const rest = await alternately(23, (c) => c.get('/api/Merchants/me', { headers: client }));
    const admitted = 1 + rest.filter((r) => r.status === 401).length;
    expect(admitted).toBeGreaterThanOrEqual(12);
    expect(admitted).toBeLessThanOrEqual(18);
    expectLimited(rest.at(-2)!, 'ip');
    expectLimited(rest.at(-1)!, 'ip');
    // Another client is not affected.
    expect((await a.get('/api/Merchants/me', { headers: newClient() })).status).toBe(401);
  });

  it('counts the API reference against the client too, and serves it gzipped', async () => {
    const client = newClient();
    const doc = await a.get('/openapi.json', { headers: { ...client, 'accept-encoding': 'gzip' } });
    expect(doc.status).toBe(200);
    expect(doc.headers.get('content-encoding')).toBe('gzip');
    expect((doc.body as { openapi: string }).openapi).toMatch(/^3\./);
    expect(doc.headers.get('ratelimit-policy')).toContain('"ip";q=12');
    const rest = await alternately(23, (c) => c.get('/openapi.json', { headers: client }));
    expectLimited(rest.at(-1)!, 'ip');
  });

  it('counts the JWT public keys against the client too: each read asks identity', async () => {
    const client = newClient();
    const keys = await a.get('/.well-known/jwks.json', { headers: client });
    expect(keys.status).toBe(200);
    expect(keys.headers.get('ratelimit-policy')).toContain('"ip";q=12');
    const rest = await alternately(23, (c) => c.get('/.well-known/jwks.json', { headers: client }));
    expectLimited(rest.at(-1)!, 'ip');
  });

  it('counts bodies refused before they are parsed (malformed, nested too deep) like any request', async () => {
    const client = { ...newClient(), 'content-type': 'application/json' };
    const bodies = ['{"email": ', `${'['.repeat(100_000)}${']'.repeat(100_000)}`];
    let n = 0;
    const sent = await alternately(24, (c) => c.post('/api/account/forgot-password', undefined, { headers: client, raw: bodies[n++ % 2] }));
    const refused = sent.filter((r) => r.status === 400);
    expect(refused.length).toBeGreaterThanOrEqual(12);
    expect(refused.length).toBeLessThanOrEqual(18);
    expect(refused[0]!.headers.get('ratelimit-policy')).toContain('"ip";q=12');
    expectLimited(sent.at(-1)!, 'ip');
  });
});

describe('a stricter limit for failed authentications, shared by the replicas', () => {
  it('after 4 failed credentials from one client, even a valid API key from it is 429 without being checked', async () => {
    const m = await createMerchant(open, platform.adminToken);
    const key = await createApiKey(open, platform.adminToken, m.id);
    const client = newClient();
    const bogus = () => `sk_${randomBytes(32).toString('base64url')}`;
    const failures = await alternately(4, (c) => c.get('/api/Merchants/me', { token: bogus(), headers: client }));
    expect(failures.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    await new Promise((r) => setTimeout(r, 300));
    for (const c of [a, b]) {
      expectLimited(await c.get('/api/Merchants/me', { token: key.key, headers: client }), 'auth-failures');
      // A forged JWT is refused the same way, before its signature is checked.
      expectLimited(await c.get('/api/Merchants/me', { token: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln', headers: client }), 'auth-failures');
    }
    // Successes do not count: another client with the valid key is served.
    const other = newClient();
    for (let i = 0; i < 6; i++) expect((await a.get('/api/Merchants/me', { token: key.key, headers: other })).status).toBe(200);
  });
});

describe('password endpoints have their own low limits, per client IP and per account', () => {
  it('per account: the 4th login for one email within a minute is 429, from any client and replica', async () => {
    const { email } = await signUp();
    const results = await alternately(3, (c) => c.post('/api/account/login', { email, password: 'wrong-password' }, { headers: newClient() }));
    expect(results.map((r) => r.status)).toEqual([401, 401, 401]);
    await new Promise((r) => setTimeout(r, 300));
    expectLimited(await a.post('/api/account/login', { email, password: PASSWORD }, { headers: newClient() }), 'password-account');
    expectLimited(await b.post('/api/account/signup', { email: email.toUpperCase(), password: PASSWORD, firstName: 'A', lastName: 'B', dateOfBirth: '1990-01-01' }, { headers: newClient() }), 'password-account');
    // A merchant user with that email is another account: the customer's attempts do not spend its limit (probe).
    expect((await b.post('/api/auth/login', { email: email.toUpperCase(), password: PASSWORD }, { headers: newClient() })).status).toBe(401);
  });

  it('per account only failed password checks count: signing in, again and again, spends nothing', async () => {
    const { email } = await signUp();
    const results = await alternately(5, (c) => c.post('/api/account/login', { email, password: PASSWORD }, { headers: newClient() }));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(results[4]!.headers.get('ratelimit')).toContain('"password-account";r=3;');
  });

  it('per account: a successful sign-in resets the count of failures, as it resets the lockout count', async () => {
    // Contract §4: the lock comes after 5 *consecutive* failures and a successful login resets
    // the count. An owner who mistypes twice and then signs in, again and again, is never
    // refused with the right password (the per-account allowance here is 3 a minute).
    const { email } = await signUp();
    const m = await createMerchant(open, platform.adminToken);
    const user = await createMerchantUser(open, platform.adminToken, m.id);
    for (const [path, who, password] of [
      ['/api/account/login', email, PASSWORD],
      ['/api/auth/login', user.email, user.password],
    ] as const) {
      const statuses: number[] = [];
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < 2; i++) statuses.push((await a.post(path, { email: who, password: 'wrong-password' }, { headers: newClient() })).status);
        statuses.push((await a.post(path, { email: who, password }, { headers: newClient() })).status);
      }
      expect(statuses, path).toEqual([401, 401, 200, 401, 401, 200]);
    }
  });

  it('per client IP: the 6th password request from one client within a minute is 429, across endpoints and replicas', async () => {
    const client = newClient();
    const sends = [
      (c: ApiClient) => c.post('/api/account/login', { email: `${unique('p')}@example.com`, password: 'whatever-password' }, { headers: client }),
      (c: ApiClient) => c.post('/api/auth/login', { email: `${unique('p')}@example.com`, password: 'whatever-password' }, { headers: client }),
      (c: ApiClient) => c.post('/api/account/reset-password', { token: randomBytes(16).toString('hex'), newPassword: 'whatever-password' }, { headers: client }),
    ];
    const results: ApiResponse[] = [];
    for (let i = 0; i < 5; i++) results.push(await sends[i % 3](i % 2 === 0 ? a : b));
    expect(results.every((r) => r.status !== 429)).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expectLimited(await sends[0](b), 'password-ip');
    expectLimited(await sends[1](a), 'password-ip');
  });
});

describe('identity sheds password hashing beyond its bound instead of queueing', () => {
  it('concurrent logins beyond PASSWORD_HASH_MAX_CONCURRENT are 503 with Retry-After; the rest are answered', async () => {
    const { email } = await signUp();
    const results = await Promise.all(Array.from({ length: 6 }, () => open.post('/api/account/login', { email, password: PASSWORD }, { headers: newClient() })));
    const shed = results.filter((r) => r.status === 503);
    expect(shed.length).toBeGreaterThan(0);
    for (const r of shed) {
      expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    expect(results.every((r) => r.status === 200 || r.status === 503)).toBe(true);
  });
});

describe('login lockout per email and client', () => {
  it('merchant-user login locks after 5 failures: 429 with Retry-After even with the right password', async () => {
    const m = await createMerchant(open, platform.adminToken);
    const { email, password } = await createMerchantUser(open, platform.adminToken, m.id);
    const client = newClient();
    for (let i = 0; i < 5; i++) expect((await open.post('/api/auth/login', { email, password: 'wrong-password' }, { headers: client })).status).toBe(401);
    const locked = await open.post('/api/auth/login', { email, password }, { headers: client });
    expect(locked.status).toBe(429);
    expect(locked.body.type).toMatch(/\/account-locked$/);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(800);
  });

  it("a stranger's failures do not keep a customer out: the stranger is locked, the owner's client still signs in", async () => {
    const { email } = await signUp();
    const stranger = newClient();
    for (let i = 0; i < 5; i++) expect((await open.post('/api/account/login', { email, password: 'wrong-password' }, { headers: stranger })).status).toBe(401);
    const strangerLocked = await open.post('/api/account/login', { email, password: PASSWORD }, { headers: stranger });
    expect(strangerLocked.status).toBe(429);
    expect(strangerLocked.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect((await open.post('/api/account/login', { email, password: PASSWORD }, { headers: newClient() })).status).toBe(200);
  });

  it('the merchant-user lock is per client too', async () => {
    const m = await createMerchant(open, platform.adminToken);
    const { email, password } = await createMerchantUser(open, platform.adminToken, m.id);
    const stranger = newClient();
    for (let i = 0; i < 5; i++) await open.post('/api/auth/login', { email, password: 'wrong-password' }, { headers: stranger });
    expect((await open.post('/api/auth/login', { email, password }, { headers: stranger })).status).toBe(429);
    expect((await open.post('/api/auth/login', { email, password }, { headers: newClient() })).status).toBe(200);
  });
});

describe('forgot-password', () => {
  it('sends at most FORGOT_PASSWORD_PER_EMAIL_PER_HOUR emails per email and still answers 202 every time', async () => {
    const { email } = await signUp();
    for (let i = 0; i < 5; i++) expect((await open.post('/api/account/forgot-password', { email }, { headers: newClient() })).status).toBe(202);
    expect(await eventually(async () => (await messagesTo(platform.dataDir, email)).filter((m) => /reset-password/.test(m.text)).length >= 2, 5000, 100)).toBe(true);
    // The later requests were answered before the first two were sent; give them the same time.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await messagesTo(platform.dataDir, email)).filter((m) => /reset-password/.test(m.text))).toHaveLength(2);
  });
});

describe('security headers', () => {
  it('nosniff on every response, no-store on /api/**, a CSP with frame-ancestors on /docs', async () => {
    const { token } = await signUp();
    const api = await open.get('/api/account/me', { token });
    expect(api.status).toBe(200);
    expect(api.headers.get('x-content-type-options')).toBe('nosniff');
    expect(api.headers.get('cache-control')).toBe('no-store');
    const problem = await open.get('/api/NoSuchRoute');
    expect(problem.headers.get('x-content-type-options')).toBe('nosniff');
    expect(problem.headers.get('cache-control')).toBe('no-store');
    const docs = await open.get('/docs');
    expect(docs.headers.get('x-content-type-options')).toBe('nosniff');
    expect(docs.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect((await open.get('/health')).headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('no-store also where the target reaches /api in another form: absolute form, percent-encoded letters', async () => {
    const { token } = await signUp();
    const encoded = await open.get('/%61pi/account/me', { token });
    expect([encoded.status, encoded.headers.get('cache-control')]).toEqual([200, 'no-store']);
    const { hostname, port, host } = new URL(platform.gatewayUrl!);
    const head = await new Promise<string>((resolve, reject) => {
      let received = '';
      const socket = connect(Number(port), hostname, () =>
        socket.write(`GET http://${host}/api/account/me HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`),
      );
      socket.on('data', (chunk) => (received += chunk.toString('latin1')));
      socket.on('end', () => resolve(received.split('\r\n\r\n')[0]!));
      socket.on('error', reject);
    });
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head.toLowerCase()).toContain('cache-control: no-store');
  });
});

describe('connections per client address', () => {
  /** A raw connection to `url`, open (connected) when it resolves. */
  const openConnection = (url: string) =>
    new Promise<Socket>((resolve, reject) => {
      const { hostname, port } = new URL(url);
      const socket = connect(Number(port), hostname, () => resolve(socket));
      socket.on('error', reject);
    });
  /** Everything the server sends on `socket` after `request` (if any) until it closes its end. */
  const answerOn = (socket: Socket, request?: string) =>
    new Promise<string>((resolve, reject) => {
      let received = '';
      socket.on('data', (chunk) => (received += chunk.toString('latin1')));
      socket.on('end', () => resolve(received));
      socket.on('error', reject);
      if (request) socket.write(request);
    });
  const health = (url: string) => `GET /health/live HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`;

  it('answers 429 with Retry-After and closes a connection beyond HTTP_MAX_CONNECTIONS_PER_IP, and admits one again once a connection closed', async () => {
    const capped = await startGatewayReplica(platform, { HTTP_MAX_CONNECTIONS_PER_IP: '3' });
    replicas.push(capped);
    const url = capped.gatewayUrl!;
    const held = await Promise.all([openConnection(url), openConnection(url), openConnection(url)]);

    const refused = await answerOn(await openConnection(url), health(url));
    const [head, body] = refused.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 429/);
    expect(head!.toLowerCase()).toContain('retry-after: 1');
    expect(head!.toLowerCase()).toContain('content-type: application/problem+json');
    expect(JSON.parse(body!)).toMatchObject({ status: 429, detail: expect.stringContaining('at most 3'), traceId: expect.stringMatching(/^[0-9a-f]{32}$/) });

    // The connections held are served as any other.
    expect(await answerOn(held[0]!, health(url))).toMatch(/^HTTP\/1\.1 200/);
    // held[0] is closed now (Connection: close): a new connection is admitted again.
    expect(await eventually(async () => /^HTTP\/1\.1 200/.test(await answerOn(await openConnection(url), health(url))))).toBe(true);
    for (const s of held) s.destroy();
  });
});
