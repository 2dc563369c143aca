import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient, createApiKey, createMerchant, createMerchantUser, eventually, unique } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const db = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
afterAll(() => db.end());

const MERCHANT_FIELDS = [
  'id', 'name', 'description', 'contactEmail', 'contactPhone', 'country', 'timeZone', 'isActive', 'gatewayConfigured', 'createdAt', 'updatedAt',
  'providerEnvironment', 'merchantGuidConfigured', 'providerMerchantProfileId', 'billingRetryOffsetsDays', 'billingTerminalAction', 'bankSettlementWindowDays',
  'platformFeePercent', 'platformFeeFixed',
];

describe('admin merchants', () => {
  it('creates a merchant with defaults and a Location header', async () => {
    const res = await api.post('/api/admin/merchants', { name: 'Acme Fitness', contactEmail: 'ops@acme.example', country: 'AU', timeZone: 'Australia/Sydney' }, { token: admin });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/api/admin/merchants/${res.body.id}`);
    expect(Object.keys(res.body).sort()).toEqual([...MERCHANT_FIELDS].sort());
    expect(res.body).toMatchObject({
      name: 'Acme Fitness', contactEmail: 'ops@acme.example', country: 'AU', timeZone: 'Australia/Sydney', description: '', isActive: true,
      gatewayConfigured: false, merchantGuidConfigured: false, providerEnvironment: 'Staging', billingRetryOffsetsDays: '1,3,7', billingTerminalAction: 'Cancel',
    });
    const read = await api.get(`/api/admin/merchants/${res.body.id}`, { token: admin });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
  });

  // interface.md, Merchant: name through timeZone are strings, "nullable on the current-merchant
  // read" only, and providerMerchantProfileId is a string. Regression: a merchant created with
  // only a name and a contact email read description, contactPhone, country, timeZone and
  // (before its gateway was configured) providerMerchantProfileId as null on the full reads.
  it('reads every text field as a string, never null, when the merchant was created without it', async () => {
    const created = await api.post('/api/admin/merchants', { name: 'Plain Fitness', contactEmail: `${unique('plain')}@example.com` }, { token: admin });
    expect(created.status).toBe(201);
    const provider = await api.put(`/api/admin/merchants/${created.body.id}/provider`, { providerEnvironment: 'Staging' }, { token: admin });
    expect(provider.status).toBe(200);
    const { key } = await createApiKey(api, admin, created.body.id);
    const me = await api.get('/api/Merchants/me', { token: key });
    expect(me.status).toBe(200);
    const reads = { created: created.body, read: (await api.get(`/api/admin/merchants/${created.body.id}`, { token: admin })).body, provider: provider.body, me: me.body };
    for (const [name, merchant] of Object.entries(reads)) {
      const text = name === 'me' ? MERCHANT_FIELDS.slice(1, 7) : [...MERCHANT_FIELDS.slice(1, 7), 'providerMerchantProfileId'];
      expect(Object.fromEntries(text.map((f) => [f, typeof merchant?.[f]])), name).toEqual(Object.fromEntries(text.map((f) => [f, 'string'])));
    }
    // Not set is the empty string on every read, the current-merchant read included.
    expect(reads.created).toMatchObject({ description: '', contactPhone: '', country: '', timeZone: '', providerMerchantProfileId: '' });
    expect(reads.me).toMatchObject({ description: '', contactPhone: '', country: '', timeZone: '' });
  });

  it('names every invalid field in a validation problem', async () => {
    const res = await api.post('/api/admin/merchants', { name: '', contactEmail: 'not-an-email', billingRetryOffsetsDays: '3,1', billingTerminalAction: 'Explode', timeZone: 'Mars/Base' }, { token: admin });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(res.body.title).toBe('One or more validation errors occurred.');
    expect(Object.keys(res.body.errors).sort()).toEqual(['billingRetryOffsetsDays', 'billingTerminalAction', 'contactEmail', 'name', 'timeZone']);
  });

  it('says "Required." of a field that is missing, whatever its type, and each bound in the same words', async () => {
    const res = await api.post('/api/admin/merchants', { contactEmail: `${unique('missing')}@example.com` }, { token: admin });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual({ name: ['Required.'] });
    const merchant = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, merchant.id);
    const plan = await api.post('/api/Plans', { merchantId: merchant.id, name: 'P' }, { token: key.key });
    expect(plan.status).toBe(400);
    // A decimal amount (a number or a string) and an enum alike.
    expect(plan.body.errors).toMatchObject({ amount: ['Required.'], interval: ['Required.'] });
    // A bound is said in the same words wherever it is checked, a null is no value.
    const login = await api.post('/api/auth/login', { email: 'someone@example.com', password: 'x'.repeat(129) });
    expect(login.status).toBe(400);
    expect(login.body.errors).toEqual({ password: ['Must be at most 128 characters.'] });
    const nulled = await api.post('/api/auth/login', { email: 'someone@example.com', password: null });
    expect(nulled.body.errors).toEqual({ password: ['Must not be null.'] });
  });

  it('takes retry offsets written with spaces around the numbers and answers them without', async () => {
    const res = await api.post('/api/admin/merchants', { name: 'Spaced Offsets', contactEmail: `${unique('spaced')}@example.com`, billingRetryOffsetsDays: ' 2, 5 ,9 ' }, { token: admin });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.billingRetryOffsetsDays).toBe('2,5,9');
    const patched = await api.patch(`/api/admin/merchants/${res.body.id}`, { billingRetryOffsetsDays: '1, 4' }, { token: admin });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.billingRetryOffsetsDays).toBe('1,4');
    // A space inside a number is still no number.
    const inside = await api.post('/api/admin/merchants', { name: 'Bad Offsets', contactEmail: `${unique('bad')}@example.com`, billingRetryOffsetsDays: '1,3 7' }, { token: admin });
    expect(inside.status).toBe(400);
    expect(Object.keys(inside.body.errors)).toEqual(['billingRetryOffsetsDays']);
  });

  it('lists merchants in the paged shape', async () => {
    await createMerchant(api, admin);
    const res = await api.get('/api/admin/merchants?page=1&pageSize=1', { token: admin });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ page: 1, pageSize: 1, hasPreviousPage: false });
    expect(res.body.items).toHaveLength(1);
    expect(res.body.totalCount).toBeGreaterThanOrEqual(2);
    expect(res.body.hasNextPage).toBe(true);
  });

  it('answers 404 for an unknown merchant and 400 for a malformed id', async () => {
    expect((await api.get('/api/admin/merchants/6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11', { token: admin })).status).toBe(404);
    const bad = await api.get('/api/admin/merchants/not-a-uuid', { token: admin });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toHaveProperty('id');
  });

  it('refuses merchant credentials on admin endpoints (wrong kind: 401)', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id);
    expect((await api.get(`/api/admin/merchants/${m.id}`, { token: key.key })).status).toBe(401);
    expect((await api.post('/api/admin/merchants', { name: 'x', contactEmail: 'x@example.com' }, { token: key.key })).status).toBe(401);
  });
});

// Regression: the admin's fee-statement list answered an empty 200 for a merchantId naming no
// merchant, where generate and every other list answer 404 merchant-not-found.
describe('GET /api/admin/fee-statements', () => {
  it('answers 404 for a merchantId that names no merchant, as the merchant lists do', async () => {
    const unknown = '00000000-0000-4000-8000-000000000001';
    const res = await api.get(`/api/admin/fee-statements?merchantId=${unknown}`, { token: admin });
    expect(res.status, JSON.stringify(res.body)).toBe(404);
    expect(res.body.type).toMatch(/\/merchant-not-found$/);
    expect((await api.get(`/api/FeeStatements?merchantId=${unknown}`, { token: admin })).status).toBe(404);
    const m = await createMerchant(api, admin);
    const own = await api.get(`/api/admin/fee-statements?merchantId=${m.id}`, { token: admin });
    expect(own.status).toBe(200);
    expect(own.body.totalCount).toBe(0);
    expect((await api.get('/api/admin/fee-statements', { token: admin })).status).toBe(200);
  });
});

describe('PUT /api/admin/merchants/{id}/provider', () => {
  it('stores credentials write-only and encrypted, reporting only the booleans', async () => {
    const m = await createMerchant(api, admin);
    const res = await api.put(`/api/admin/merchants/${m.id}/provider`, { id: m.id, providerEnvironment: 'Staging', gatewayUsername: 'gw-user', gatewayPassword: 'gw-secret-pass' }, { token: admin });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([...MERCHANT_FIELDS].sort());
    expect(res.body).toMatchObject({ gatewayConfigured: true, merchantGuidConfigured: false, providerEnvironment: 'Staging' });
    expect(JSON.stringify(res.body)).not.toContain('gw-secret-pass');

    const { rows } = await db.query('select provider_credentials_sealed from billing.merchants where id = $1', [m.id]);
    expect(rows[0].provider_credentials_sealed).toMatch(/^v2:/);
    expect(rows[0].provider_credentials_sealed).not.toContain('gw-secret-pass');
    expect(rows[0].provider_credentials_sealed).not.toContain('gw-user');
  });

  it('leaves absent or null fields unchanged', async () => {
    const m = await createMerchant(api, admin);
    await api.put(`/api/admin/merchants/${m.id}/provider`, { gatewayUsername: 'u', gatewayPassword: 'p', merchantGuid: 'guid-1' }, { token: admin });
    const res = await api.put(`/api/admin/merchants/${m.id}/provider`, { providerEnvironment: 'Production', gatewayPassword: null }, { token: admin });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ providerEnvironment: 'Production', gatewayConfigured: true, merchantGuidConfigured: true });
  });

  it('answers 400 for a body id that differs from the path, or a bad environment; 404 for an unknown merchant', async () => {
    const m = await createMerchant(api, admin);
    const other = await createMerchant(api, admin);
    expect((await api.put(`/api/admin/merchants/${m.id}/provider`, { id: other.id }, { token: admin })).status).toBe(400);
    const env = await api.put(`/api/admin/merchants/${m.id}/provider`, { providerEnvironment: 'Mars' }, { token: admin });
    expect(env.status).toBe(400);
    expect(env.body.errors).toHaveProperty('providerEnvironment');
    expect((await api.put('/api/admin/merchants/6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11/provider', { gatewayUsername: 'u' }, { token: admin })).status).toBe(404);
  });
});

describe('PATCH /api/admin/merchants/{id}', () => {
  const patch = (id: string, body: unknown) => api.patch(`/api/admin/merchants/${id}`, body, { token: admin });
  const read = async (id: string) => (await api.get(`/api/admin/merchants/${id}`, { token: admin })).body;

  it('changes the profile and the billing terms; absent or null fields are unchanged', async () => {
    const m = await createMerchant(api, admin, { description: 'Gyms', contactPhone: '+61 2 5550 0000', country: 'AU', timeZone: 'Australia/Sydney' });
    const email = `${unique('new')}@example.com`;
    const res = await patch(m.id, { name: 'Renamed Fitness', contactEmail: email, contactPhone: '+64 9 555 0000', country: 'NZ', timeZone: 'Pacific/Auckland', description: null, billingTerminalAction: 'Pause' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed Fitness', contactEmail: email, description: 'Gyms', contactPhone: '+64 9 555 0000', country: 'NZ', timeZone: 'Pacific/Auckland', billingTerminalAction: 'Pause', billingRetryOffsetsDays: '1,3,7' });
    expect(Date.parse(res.body.updatedAt)).toBeGreaterThan(Date.parse(m.updatedAt as string));
    expect(await read(m.id)).toEqual(res.body);
    const me = await createApiKey(api, admin, m.id);
    expect((await api.get('/api/Merchants/me', { token: me.key })).body).toMatchObject({ name: 'Renamed Fitness', contactEmail: email });
  });

  it('answers 400 naming "$" for a body that is not a JSON object (it was an empty update), and changes nothing', async () => {
    const m = await createMerchant(api, admin);
    for (const body of [null, [], [{ name: 'X' }], 5, 'name', true]) {
      const res = await patch(m.id, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 400, title: 'One or more validation errors occurred.', errors: { $: [expect.any(String)] } });
      expect(Object.keys(res.body.errors)).toEqual(['$']);
    }
    expect(await read(m.id)).toEqual(m);
  });

  it('refuses by name the fields it cannot change (they were silently ignored), ignores names that are no field, and refuses a body id of another merchant', async () => {
    const m = await createMerchant(api, admin);
    const refused = await patch(m.id, { name: 'Kept Out', isActive: false, gatewayConfigured: true, providerEnvironment: 'Production', gatewayPassword: 'pw', createdAt: '2020-01-01T00:00:00Z' });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(Object.keys(refused.body.errors).sort()).toEqual(['createdAt', 'gatewayConfigured', 'gatewayPassword', 'isActive', 'providerEnvironment']);
    expect(await read(m.id)).toEqual(m);

    const nulls = await patch(m.id, { id: m.id, isActive: null, providerEnvironment: null, notAField: 'x', bankSettlementWindowDays: 5 });
    expect(nulls.status, JSON.stringify(nulls.body)).toBe(200);
    expect(nulls.body).toMatchObject({ isActive: true, providerEnvironment: 'Staging', bankSettlementWindowDays: 5 });
    expect(nulls.body).not.toHaveProperty('notAField');

    const invalid = await patch(m.id, { name: '  ', contactEmail: 'nope', country: 'nz', timeZone: 'Mars/Base' });
    expect(invalid.status).toBe(400);
    expect(Object.keys(invalid.body.errors).sort()).toEqual(['contactEmail', 'country', 'name', 'timeZone']);
    const other = await createMerchant(api, admin);
    expect((await patch(m.id, { id: other.id, name: 'X' })).status).toBe(400);
    expect((await read(m.id)).name).toBe(m.name);
    expect((await patch('00000000-0000-4000-8000-000000000000', { name: 'X' })).status).toBe(404);
  });
});

describe('GET /api/Merchants/me', () => {
  it('answers id through updatedAt for a merchant user and for an API key', async () => {
    const m = await createMerchant(api, admin, { description: 'Gym' });
    const { token } = await createMerchantUser(api, admin, m.id, 'Viewer');
    const key = await createApiKey(api, admin, m.id);
    for (const credential of [token, key.key]) {
      const res = await api.get('/api/Merchants/me', { token: credential });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(MERCHANT_FIELDS.slice(0, 11));
      expect(res.body).toMatchObject({ id: m.id, description: 'Gym' });
    }
  });

  it('matches the path case-insensitively', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id);
    expect((await api.get('/API/merchants/ME', { token: key.key })).status).toBe(200);
  });

  it('answers 404 when the merchant named by the token no longer exists', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id);
    await db.query('delete from billing.merchants where id = $1', [m.id]);
    const res = await api.get('/api/Merchants/me', { token: key.key });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
  });

  it('answers 401 for the platform admin token (it has no merchant)', async () => {
    expect((await api.get('/api/Merchants/me', { token: admin })).status).toBe(401);
  });
});

describe('merchant users (admin)', () => {
  it('creates users, refuses a duplicate email (any case) with 409, and 404s an unknown merchant', async () => {
    const m = await createMerchant(api, admin);
    const email = `${unique('Dup')}@Example.com`;
    const first = await api.post(`/api/admin/merchants/${m.id}/users`, { email, password: 'password-123', fullName: 'A', role: 'Admin' }, { token: admin });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ id: expect.any(String), merchantId: m.id, email, fullName: 'A', role: 'Admin', isActive: true });
    const dup = await api.post(`/api/admin/merchants/${m.id}/users`, { email: email.toUpperCase(), password: 'password-123', fullName: 'B', role: 'Staff' }, { token: admin });
    expect(dup.status).toBe(409);
    const missing = await api.post('/api/admin/merchants/6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11/users', { email: `${unique()}@example.com`, password: 'password-123', fullName: 'C', role: 'Staff' }, { token: admin });
    expect(missing.status).toBe(404);
    const weak = await api.post(`/api/admin/merchants/${m.id}/users`, { email: `${unique()}@example.com`, password: 'short', fullName: 'C', role: 'Boss' }, { token: admin });
    expect(weak.status).toBe(400);
    expect(Object.keys(weak.body.errors).sort()).toEqual(['password', 'role']);
  });

  it('answers the Location of a created user with that user; another merchant\'s or an unknown user is 404', async () => {
    const m = await createMerchant(api, admin);
    const other = await createMerchant(api, admin);
    const res = await api.post(`/api/admin/merchants/${m.id}/users`, { email: `${unique('loc')}@example.com`, password: 'password-123', fullName: 'Loc', role: 'Staff' }, { token: admin });
    expect(res.status).toBe(201);
    const location = res.headers.get('location')!;
    expect(location).toBe(`/api/admin/merchants/${m.id}/users/${res.body.id}`);
    const got = await api.get(location, { token: admin });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
    expect((await api.get(`/api/admin/merchants/${other.id}/users/${res.body.id}`, { token: admin })).status).toBe(404);
    expect((await api.get(`/api/admin/merchants/${m.id}/users/6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11`, { token: admin })).status).toBe(404);
    expect((await api.get(`/api/admin/merchants/${m.id}/users/not-a-uuid`, { token: admin })).status).toBe(400);
    const { key } = await createApiKey(api, admin, m.id);
    expect((await api.get(location, { token: key })).status).toBe(401);
  });

  it('lets an Owner manage the users of its own merchant; lower roles are 403, an API key 401', async () => {
    const m = await createMerchant(api, admin);
    const other = await createMerchant(api, admin);
    const owner = await createMerchantUser(api, admin, m.id, 'Owner');
    const email = `${unique('own')}@example.com`;
    const made = await api.post(`/api/admin/merchants/${m.id}/users`, { email, password: 'password-123', fullName: 'Staffer', role: 'Staff' }, { token: owner.token });
    expect(made.status).toBe(201);
    expect(made.body).toEqual({ id: expect.any(String), merchantId: m.id, email, fullName: 'Staffer', role: 'Staff', isActive: true });
    const location = made.headers.get('location')!;
    expect((await api.get(location, { token: owner.token })).body).toEqual(made.body);
    const listed = await api.get(`/api/admin/merchants/${m.id}/users?pageSize=1&page=2`, { token: owner.token });
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ items: [made.body], page: 2, pageSize: 1, totalCount: 2, totalPages: 2, hasNextPage: false, hasPreviousPage: true });
    expect((await api.get(`/api/admin/merchants/${m.id}/users`, { token: admin })).body.items.map((u: { id: string }) => u.id)).toEqual([owner.user.id, made.body.id]);
    expect((await api.get(`/api/admin/merchants/${other.id}/users`, { token: owner.token })).status).toBe(403);
    const promoted = await api.patch(location, { role: 'Admin' }, { token: owner.token });
    expect(promoted.status).toBe(200);
    expect(promoted.body.role).toBe('Admin');
    // The promoted user signs in as Admin, and an Admin does not manage users.
    const asAdmin = (await api.post('/api/auth/login', { email, password: 'password-123' })).body.token;
    for (const role of ['Admin', 'Staff', 'Viewer']) {
      const lower = role === 'Admin' ? { token: asAdmin } : await createMerchantUser(api, admin, m.id, role);
      const create = await api.post(`/api/admin/merchants/${m.id}/users`, { email: `${unique()}@example.com`, password: 'password-123', fullName: 'X', role: 'Staff' }, { token: lower.token });
      expect(create.status, role).toBe(403);
      expect(create.body.type).toMatch(/forbidden$/);
      expect((await api.patch(location, { isActive: false }, { token: lower.token })).status, role).toBe(403);
      expect((await api.get(location, { token: lower.token })).status, role).toBe(403);
      expect((await api.get(`/api/admin/merchants/${m.id}/users`, { token: lower.token })).status, role).toBe(403);
    }
    // Another merchant's users are out of the Owner's reach; an API key is not a credential for them.
    const foreign = await createMerchantUser(api, admin, other.id, 'Staff');
    expect((await api.patch(`/api/admin/merchants/${other.id}/users/${foreign.user.id}`, { isActive: false }, { token: owner.token })).status).toBe(403);
    expect((await api.patch(`/api/admin/merchants/${m.id}/users/${foreign.user.id}`, { isActive: false }, { token: owner.token })).status).toBe(404);
    expect((await api.get('/api/Merchants/me', { token: foreign.token })).status).toBe(200);
    const { key } = await createApiKey(api, admin, m.id);
    expect((await api.post(`/api/admin/merchants/${m.id}/users`, { email: `${unique()}@example.com`, password: 'password-123', fullName: 'K', role: 'Staff' }, { token: key })).status).toBe(401);
    // The Owner deactivating a user ends that user's tokens, as the platform admin's does.
    expect((await api.patch(location, { isActive: false }, { token: owner.token })).status).toBe(200);
    expect((await api.get('/api/Merchants/me', { token: asAdmin })).status).toBe(401);
    // Other admin endpoints stay the platform admin's.
    expect((await api.get(`/api/admin/merchants/${m.id}`, { token: owner.token })).status).toBe(401);
  });

  it("keeps an active Owner: an Owner cannot demote or deactivate the merchant's last one; the platform admin can", async () => {
    const m = await createMerchant(api, admin);
    const a = await createMerchantUser(api, admin, m.id, 'Owner');
    const self = `/api/admin/merchants/${m.id}/users/${a.user.id}`;
    for (const change of [{ role: 'Admin' }, { isActive: false }, { role: 'Viewer', isActive: true }]) {
      const res = await api.patch(self, change, { token: a.token });
      expect(res.status, JSON.stringify(change)).toBe(409);
      expect(res.body).toMatchObject({ status: 409, detail: expect.stringContaining('only active Owner'), traceId: expect.any(String) });
    }
    // Nothing changed: the Owner's token still works and still manages users.
    expect((await api.get(self, { token: a.token })).body).toMatchObject({ role: 'Owner', isActive: true });
    // A change that keeps the Owner an Owner is fine.
    expect((await api.patch(self, { role: 'Owner', isActive: true }, { token: a.token })).status).toBe(200);
    const again = await api.post('/api/auth/login', { email: a.email, password: a.password });
    // Two Owners removing themselves at once: exactly one succeeds.
    const b = await createMerchantUser(api, admin, m.id, 'Owner');
    const [ra, rb] = await Promise.all([
      api.patch(self, { role: 'Admin' }, { token: again.body.token }),
      api.patch(`/api/admin/merchants/${m.id}/users/${b.user.id}`, { isActive: false }, { token: b.token }),
    ]);
    expect([ra.status, rb.status].sort()).toEqual([200, 409]);
    const owners = (await api.get(`/api/admin/merchants/${m.id}/users`, { token: admin })).body.items.filter((u: { role: string; isActive: boolean }) => u.role === 'Owner' && u.isActive);
    expect(owners).toHaveLength(1);
    // The platform admin is not held back: it can deactivate the last Owner (and restore one).
    const last = `/api/admin/merchants/${m.id}/users/${owners[0].id}`;
    expect((await api.patch(last, { isActive: false }, { token: admin })).status).toBe(200);
    expect((await api.patch(last, { isActive: true }, { token: admin })).status).toBe(200);
  });

  it("ends a user's tokens only on a real change: the role the user already has keeps them, another role ends them", async () => {
    const m = await createMerchant(api, admin);
    const { user, token } = await createMerchantUser(api, admin, m.id, 'Staff');
    const path = `/api/admin/merchants/${m.id}/users/${user.id}`;
    for (const unchanged of [{ role: 'Staff' }, { isActive: true }, { role: 'Staff', isActive: true }, { role: null, isActive: null }, {}]) {
      const res = await api.patch(path, unchanged, { token: admin });
      expect(res.status, JSON.stringify(unchanged)).toBe(200);
      expect(res.body).toMatchObject({ role: 'Staff', isActive: true });
      expect((await api.get('/api/Merchants/me', { token })).status, JSON.stringify(unchanged)).toBe(200);
    }
    expect((await api.patch(path, { role: 'Viewer' }, { token: admin })).status).toBe(200);
    expect((await api.get('/api/Merchants/me', { token })).status).toBe(401);
  });

  it('stores the password as a scrypt hash', async () => {
    const m = await createMerchant(api, admin);
    const { user, password } = await createMerchantUser(api, admin, m.id);
    const { rows } = await db.query('select password_hash from identity.merchant_users where id = $1', [user.id]);
    expect(rows[0].password_hash).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(rows[0].password_hash).not.toContain(password);
  });

  it('signs in with the claims of contract.md §1', async () => {
    const m = await createMerchant(api, admin);
    const email = `${unique('l')}@example.com`;
    await api.post(`/api/admin/merchants/${m.id}/users`, { email, password: 'password-123', fullName: 'Lee', role: 'Staff' }, { token: admin });
    const res = await api.post('/api/auth/login', { email, password: 'password-123' });
    expect(res.status).toBe(200);
    expect(res.body.user).toEqual({ id: expect.any(String), merchantId: m.id, email, fullName: 'Lee', role: 'Staff' });
    const [header, payload] = res.body.token.split('.').slice(0, 2).map((p: string) => JSON.parse(Buffer.from(p, 'base64url').toString()));
    expect(header.alg).toBe('ES256');
    expect(payload).toMatchObject({ sub: res.body.user.id, mid: m.id, role: 'Staff', iss: expect.any(String), aud: expect.any(String) });
    expect(payload.exp - payload.iat).toBeLessThanOrEqual(3600);
    expect(Date.parse(res.body.expiresAt)).toBe(payload.exp * 1000);
  });

  it('answers the same 401 for a wrong password, an unknown email and an inactive user', async () => {
    const m = await createMerchant(api, admin);
    const { user, email, password } = await createMerchantUser(api, admin, m.id);
    const wrong = await api.post('/api/auth/login', { email, password: 'nope-nope-nope' });
    const unknown = await api.post('/api/auth/login', { email: `${unique()}@example.com`, password });
    expect((await api.patch(`/api/admin/merchants/${m.id}/users/${user.id}`, { isActive: false }, { token: admin })).status).toBe(200);
    const inactive = await api.post('/api/auth/login', { email, password });
    for (const r of [wrong, unknown, inactive]) {
      expect(r.status).toBe(401);
      expect({ title: r.body.title, detail: r.body.detail }).toEqual({ title: wrong.body.title, detail: wrong.body.detail });
    }
    const invalid = await api.post('/api/auth/login', { email: 'nope', password: '' });
    expect(invalid.status).toBe(400);
    expect(Object.keys(invalid.body.errors).sort()).toEqual(['email', 'password']);
  });
});

describe('API keys', () => {
  it('mints sk_ keys and whsec_ secrets shown once, stored hashed and encrypted', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id, { name: 'primary' });
    expect(key.key).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(key.signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(key).toMatchObject({ name: 'primary', keyPrefix: key.key.slice(0, 11), signingSecretPrefix: key.signingSecret.slice(0, 12), webhookUrl: null, webhookEvents: null, webhookEnabled: false, revokedAt: null, lastUsedAt: null });

    const { rows } = await db.query('select key_hash, signing_secret_sealed from identity.api_keys where id = $1', [key.id]);
    const { createHash } = await import('node:crypto');
    expect(rows[0].key_hash).toBe(createHash('sha256').update(key.key).digest('hex'));
    expect(rows[0].signing_secret_sealed).not.toContain(key.signingSecret.slice(6));

    const listed = await api.get(`/api/ApiKeys?merchantId=${m.id}`, { token: key.key });
    expect(listed.status).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    expect(listed.body.items[0]).not.toHaveProperty('key');
    expect(listed.body.items[0]).not.toHaveProperty('signingSecret');
  });

  it('lets a merchant create and revoke its own keys; revocation applies on the next request', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id);
    const created = await api.post('/api/ApiKeys', { merchantId: m.id, name: 'second' }, { token: key.key });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/api/ApiKeys/${created.body.id}`);
    expect((await api.get('/api/Merchants/me', { token: created.body.key })).status).toBe(200);
    expect((await api.del(`/api/ApiKeys/${created.body.id}`, { token: key.key })).status).toBe(204);
    expect((await api.get('/api/Merchants/me', { token: created.body.key })).status).toBe(401);
    const read = await api.get(`/api/ApiKeys/${created.body.id}`, { token: key.key });
    expect(read.body.revokedAt).not.toBeNull();
  });

  it('answers 401 for a key past its expiresAt', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id, { expiresAt: new Date(Date.now() + 1500).toISOString() });
    expect((await api.get('/api/Merchants/me', { token: key.key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1700));
    expect((await api.get('/api/Merchants/me', { token: key.key })).status).toBe(401);
  });

  it('refuses an expiresAt in the past', async () => {
    const m = await createMerchant(api, admin);
    const res = await api.post(`/api/admin/merchants/${m.id}/api-keys`, { name: 'x', expiresAt: '2020-01-01T00:00:00Z' }, { token: admin });
    expect(res.status).toBe(400);
    expect(res.body.errors).toHaveProperty('expiresAt');
  });

  it('maintains lastUsedAt without a write per request', async () => {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id);
    for (let i = 0; i < 5; i++) await api.get('/api/Merchants/me', { token: key.key });
    const used = await eventually(async () => (await api.get(`/api/ApiKeys/${key.id}`, { token: admin })).body.lastUsedAt, 8000, 200);
    expect(used).toEqual(expect.any(String));
  });

  it('answers 403 for another existing merchant and 404 for an unknown one', async () => {
    const a = await createMerchant(api, admin);
    const b = await createMerchant(api, admin);
    const keyA = await createApiKey(api, admin, a.id);
    const keyB = await createApiKey(api, admin, b.id);
    expect((await api.post('/api/ApiKeys', { merchantId: b.id, name: 'x' }, { token: keyA.key })).status).toBe(403);
    expect((await api.get(`/api/ApiKeys?merchantId=${b.id}`, { token: keyA.key })).status).toBe(403);
    expect((await api.post('/api/ApiKeys', { merchantId: '6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11', name: 'x' }, { token: keyA.key })).status).toBe(404);
    // Another merchant's key addressed by id alone is indistinguishable from a missing one.
    expect((await api.get(`/api/ApiKeys/${keyB.id}`, { token: keyA.key })).status).toBe(404);
    expect((await api.del(`/api/ApiKeys/${keyB.id}`, { token: keyA.key })).status).toBe(404);
    expect((await api.get('/api/Merchants/me', { token: keyB.key })).status).toBe(200);
  });

  it('enforces roles: Viewer reads, Admin manages keys', async () => {
    const m = await createMerchant(api, admin);
    const viewer = await createMerchantUser(api, admin, m.id, 'Viewer');
    const staff = await createMerchantUser(api, admin, m.id, 'Staff');
    const adminUser = await createMerchantUser(api, admin, m.id, 'Admin');
    expect((await api.get(`/api/ApiKeys?merchantId=${m.id}`, { token: viewer.token })).status).toBe(200);
    expect((await api.post('/api/ApiKeys', { merchantId: m.id, name: 'x' }, { token: viewer.token })).status).toBe(403);
    expect((await api.post('/api/ApiKeys', { merchantId: m.id, name: 'x' }, { token: staff.token })).status).toBe(403);
    expect((await api.post('/api/ApiKeys', { merchantId: m.id, name: 'x' }, { token: adminUser.token })).status).toBe(201);
  });
});

describe('PUT /api/ApiKeys/{id}/webhook', () => {
  async function setup() {
    const m = await createMerchant(api, admin);
    const key = await createApiKey(api, admin, m.id);
    const put = (body: Record<string, unknown>, id = key.id, token = key.key) => api.put(`/api/ApiKeys/${id}/webhook`, { id, merchantId: m.id, ...body }, { token });
    return { m, key, put };
  }

  it('sets URL, events and enabled flag; absent fields stay; null events means all, [] none', async () => {
    const { put } = await setup();
    const res = await put({ webhookUrl: 'https://hooks.example.com/billing', webhookEvents: ['subscription.created', 'member.created'], webhookEnabled: true });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ webhookUrl: 'https://hooks.example.com/billing', webhookEvents: ['subscription.created', 'member.created'], webhookEnabled: true });
    const partial = await put({ webhookEvents: null });
    expect(partial.body).toMatchObject({ webhookUrl: 'https://hooks.example.com/billing', webhookEvents: null, webhookEnabled: true });
    const none = await put({ webhookEvents: [] });
    expect(none.body.webhookEvents).toEqual([]);
    const loopback = await put({ webhookUrl: 'http://127.0.0.1:9999/hook' });
    expect(loopback.status).toBe(200);
    // All of 127.0.0.0/8 is loopback, not only 127.0.0.1.
    const otherLoopback = await put({ webhookUrl: 'http://127.0.0.2:9999/hook' });
    expect(otherLoopback.status).toBe(200);
    expect(otherLoopback.body.webhookUrl).toBe('http://127.0.0.2:9999/hook');
    // Stored as sent: a URL of exactly 2048 characters is kept whole.
    const longest = `https://hooks.example.com/${'a'.repeat(2048 - 26)}`;
    expect((await put({ webhookUrl: longest })).body.webhookUrl).toBe(longest);
  });

  // Regression: a URL with leading or trailing whitespace was trimmed and stored without it
  // (answered 200), where text is stored exactly as sent; whitespace is in no URI, so it is refused.
  it('refuses a URL holding whitespace or control characters instead of trimming it', async () => {
    const { put } = await setup();
    expect((await put({ webhookUrl: 'https://hooks.example.com/kept' })).status).toBe(200);
    for (const webhookUrl of [' https://hooks.example.com/x', 'https://hooks.example.com/x ', 'https://hooks.example.com/x\n', '\thttps://hooks.example.com/x', 'https://hooks.example.com/a b']) {
      const res = await put({ webhookUrl });
      expect(res.status, JSON.stringify(webhookUrl)).toBe(400);
      expect(Object.keys(res.body.errors), JSON.stringify(webhookUrl)).toEqual(['webhookUrl']);
    }
    expect((await put({})).body.webhookUrl).toBe('https://hooks.example.com/kept');
  });

  it('validates every field', async () => {
    const { put, m, key } = await setup();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ webhookUrl: 'not a url' }, 'webhookUrl'],
      [{ webhookUrl: 'http://hooks.example.com/x' }, 'webhookUrl'],
      [{ webhookUrl: 'http://127.0.0.1.nip.io/x' }, 'webhookUrl'],
      [{ webhookUrl: `https://example.com/${'a'.repeat(2048)}` }, 'webhookUrl'],
      [{ webhookEvents: ['subscription.created', 'no.such.event'] }, 'webhookEvents[1]'],
      [{ webhookEnabled: true, webhookUrl: null }, 'webhookUrl'],
      [{ webhookEnabled: 'yes' }, 'webhookEnabled'],
    ];
    for (const [body, field] of cases) {
      const res = await put(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(Object.keys(res.body.errors), JSON.stringify(body)).toContain(field);
    }
    const missing = await api.put(`/api/ApiKeys/${key.id}/webhook`, { webhookEnabled: false }, { token: key.key });
    expect(missing.status).toBe(400);
    expect(Object.keys(missing.body.errors).sort()).toEqual(['id', 'merchantId']);
    const mismatch = await api.put(`/api/ApiKeys/${key.id}/webhook`, { id: '6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11', merchantId: m.id }, { token: key.key });
    expect(mismatch.status).toBe(400);
    // A revoked key: 400 naming id (not a 409, which the endpoint does not answer).
    const revoked = await createApiKey(api, admin, m.id);
    expect((await api.del(`/api/ApiKeys/${revoked.id}`, { token: admin })).status).toBe(204);
    const onRevoked = await put({ webhookEnabled: false }, revoked.id, key.key);
    expect(onRevoked.status).toBe(400);
    expect(onRevoked.body.errors.id[0]).toMatch(/revoked/);
  });

  // Regression: a revoked key, which gets no webhooks, still read webhookEnabled: true.
  it('a revoked key reads webhookEnabled false in GET and the list, its other webhook settings kept', async () => {
    const { m, key, put } = await setup();
    const settings = { webhookUrl: 'https://hooks.example.com/revoked', webhookEvents: ['member.created'] };
    expect((await put({ ...settings, webhookEnabled: true })).body.webhookEnabled).toBe(true);
    expect((await api.del(`/api/ApiKeys/${key.id}`, { token: admin })).status).toBe(204);
    const read = await api.get(`/api/ApiKeys/${key.id}`, { token: admin });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ ...settings, webhookEnabled: false, revokedAt: expect.any(String) });
    const listed = await api.get(`/api/ApiKeys?merchantId=${m.id}`, { token: admin });
    expect(listed.body.items.find((k: { id: string }) => k.id === key.id)).toMatchObject({ ...settings, webhookEnabled: false });
  });

  it("answers 404 for an unknown key or another merchant's key, 403 for another merchant", async () => {
    const a = await setup();
    const b = await setup();
    expect((await a.put({ webhookEnabled: false }, '6d1f7c39-5d0c-4a4e-9d59-0d0b4f1d1c11')).status).toBe(404);
    expect((await a.put({ webhookEnabled: false }, b.key.id)).status).toBe(404);
    const foreign = await api.put(`/api/ApiKeys/${a.key.id}/webhook`, { id: a.key.id, merchantId: b.m.id }, { token: a.key.key });
    expect(foreign.status).toBe(403);
  });
});
