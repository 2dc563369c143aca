import { generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient, createApiKey, createMerchant, createMerchantUser } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');

let merchantId: string;
let apiKey: string;
let userToken: string;
let userId: string;

beforeAll(async () => {
  const m = await createMerchant(api, admin);
  merchantId = m.id;
  apiKey = (await createApiKey(api, admin, m.id)).key;
  const u = await createMerchantUser(api, admin, m.id, 'Owner');
  userToken = u.token;
  userId = u.user.id;
});

function b64(o: unknown) {
  return Buffer.from(JSON.stringify(o)).toString('base64url');
}

describe('Authorization header', () => {
  it.each([
    ['no header', undefined],
    ['lowercase scheme', (t: string) => `bearer ${t}`],
    ['upper-case scheme', (t: string) => `BEARER ${t}`],
    ['other scheme', (t: string) => `Basic ${t}`],
    ['two spaces', (t: string) => `Bearer  ${t}`],
    ['trailing junk', (t: string) => `Bearer ${t} x`],
    ['empty credential', () => 'Bearer '],
  ])('%s → 401 problem', async (_name, make) => {
    const headers: Record<string, string> = make ? { authorization: make(apiKey) } : {};
    const res = await api.get('/api/Merchants/me', { headers });
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 401, type: expect.stringMatching(/unauthenticated$/), title: expect.any(String), detail: expect.any(String) });
    // RFC 9110 §15.5.2 / RFC 6750 §3: a 401 names the bearer scheme, and says when the credential sent was refused.
    expect(res.headers.get('www-authenticate')).toBe(make ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"');
  });

  it('accepts exactly "Bearer <credential>"', async () => {
    expect((await api.get('/api/Merchants/me', { headers: { authorization: `Bearer ${apiKey}` } })).status).toBe(200);
  });

  it('refuses an unknown or malformed API key and a wrong admin token', async () => {
    expect((await api.get('/api/Merchants/me', { token: `sk_${'A'.repeat(43)}` })).status).toBe(401);
    expect((await api.get('/api/Merchants/me', { token: 'sk_short' })).status).toBe(401);
    expect((await api.get('/api/admin/merchants', { token: `${admin}x` })).status).toBe(401);
  });
});

describe('merchant-user JWTs', () => {
  it('refuses a token whose payload was tampered with', async () => {
    const [h, p, s] = userToken.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = `${h}.${b64({ ...payload, role: 'Owner', mid: '6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11' })}.${s}`;
    expect((await api.get('/api/Merchants/me', { token: forged })).status).toBe(401);
  });

  it('refuses alg: none', async () => {
    const [h, p] = userToken.split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString());
    const none = `${b64({ ...header, alg: 'none' })}.${p}.`;
    expect((await api.get('/api/Merchants/me', { token: none })).status).toBe(401);
  });

  it('refuses a token signed by a foreign key, with a known or unknown kid', async () => {
    const [h, p] = userToken.split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString());
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const { privateKey } = await generateKeyPair('ES256');
    for (const kid of [header.kid, 'unknown-kid']) {
      const forged = await new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid, typ: header.typ }).sign(privateKey);
      expect((await api.get('/api/Merchants/me', { token: forged })).status).toBe(401);
    }
  });

  it('refuses a symmetric-algorithm token keyed with the public key (algorithm pinned)', async () => {
    const jwks = (await api.get('/.well-known/jwks.json')).body;
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', alg: 'ES256' });
    const [h, p] = userToken.split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString());
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256', kid: header.kid, typ: header.typ }).sign(new TextEncoder().encode(JSON.stringify(jwks.keys[0])));
    expect((await api.get('/api/Merchants/me', { token: forged })).status).toBe(401);
  });

  it('ends tokens of a deactivated user on the next request, and restores login after reactivation', async () => {
    const m = await createMerchant(api, admin);
    const u = await createMerchantUser(api, admin, m.id, 'Staff');
    expect((await api.get('/api/Merchants/me', { token: u.token })).status).toBe(200);
    expect((await api.patch(`/api/admin/merchants/${m.id}/users/${u.user.id}`, { isActive: false }, { token: admin })).status).toBe(200);
    expect((await api.get('/api/Merchants/me', { token: u.token })).status).toBe(401);
    expect((await api.patch(`/api/admin/merchants/${m.id}/users/${u.user.id}`, { isActive: true }, { token: admin })).status).toBe(200);
    expect((await api.get('/api/Merchants/me', { token: u.token })).status).toBe(401);
    const again = await api.post('/api/auth/login', { email: u.email, password: u.password });
    expect(again.status).toBe(200);
    expect((await api.get('/api/Merchants/me', { token: again.body.token })).status).toBe(200);
  });

  // A login whose password check is under way when the user is deactivated or given another role
  // must not hand out a token that outlives the change (the check takes hundreds of milliseconds).
  it.each([
    ['deactivated', { isActive: false }],
    ['given another role', { role: 'Viewer' }],
  ])('a login racing the user being %s yields no token of the old state', async (_name, change) => {
    const m = await createMerchant(api, admin);
    await createMerchantUser(api, admin, m.id, 'Owner');
    const u = await createMerchantUser(api, admin, m.id, 'Owner');
    const login = api.post('/api/auth/login', { email: u.email, password: u.password });
    await new Promise((r) => setTimeout(r, 100));
    expect((await api.patch(`/api/admin/merchants/${m.id}/users/${u.user.id}`, change, { token: admin })).status).toBe(200);
    const res = await login;
    if (res.status === 200) {
      const after = await api.get(`/api/admin/merchants/${m.id}/users`, { token: res.body.token });
      // Either the token was revoked by the change, or it carries the new state (Viewer: 403).
      expect([401, 403]).toContain(after.status);
      if (after.status === 403) expect(res.body.user.role).toBe('Viewer');
    } else {
      expect(res.status).toBe(401);
    }
  });

  it('answers 403 when the role is below the endpoint, and 404 for an unknown user', async () => {
    const viewer = await createMerchantUser(api, admin, merchantId, 'Viewer');
    const res = await api.put(`/api/ApiKeys/6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11/webhook`, { id: '6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11', merchantId }, { token: viewer.token });
    expect(res.status).toBe(403);
    expect(res.body.type).toMatch(/forbidden$/);
    expect((await api.patch(`/api/admin/merchants/${merchantId}/users/6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11`, { isActive: false }, { token: admin })).status).toBe(404);
    void userId;
  });
});

describe('HTTP edge cases', () => {
  it('answers 404 problem for unknown routes', async () => {
    const res = await api.get('/api/nothing-here', { token: apiKey });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('answers 400 for malformed JSON', async () => {
    const res = await api.request('POST', '/api/ApiKeys', { token: apiKey, raw: '{"merchantId": ', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('answers 415 for a body that is not JSON', async () => {
    const res = await api.request('POST', '/api/ApiKeys', { token: apiKey, raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(415);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('answers 413 for a body over 1 MiB', async () => {
    const res = await api.request('POST', '/api/ApiKeys', { token: apiKey, raw: JSON.stringify({ merchantId, name: 'x'.repeat(1024 * 1024 + 10) }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('serves the OpenAPI 3.1 document and a docs page', async () => {
    const doc = await api.get('/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe('3.1.0');
    expect(doc.body.paths).toHaveProperty('/api/Merchants/me');
    expect(doc.body.paths['/api/ApiKeys/{id}/webhook'].put.requestBody).toBeDefined();
    expect(doc.body.components.schemas).toHaveProperty('Merchant');
    const docs = await fetch(`${inject('gatewayUrl')}/docs`);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain('/openapi.json');
  });
});
