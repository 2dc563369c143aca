import { beforeAll, describe, expect, it } from 'vitest';
import { adminToken, gateway } from '../support/e2e.js';

/**
 * Contract §12 (collections; interface.md: page and pageSize are int32), regression for: a `page`
 * past int32 answered 500 on `/api/ApiKeys` and `/api/admin/merchants` and silently wrapped
 * modulo 2^32 on the other collections (page 2^32 + 1 answered page 1). The cases come from the
 * gateway's route table (its OpenAPI document), so collections added later are covered too.
 */
const http = gateway();
const MAX_INT32 = 2_147_483_647;
const SOME_UUID = '00000000-0000-4000-8000-000000000001';
let pagedRoutes: string[] = [];
/** The query that scopes each paged route: `merchantId=` of a fresh merchant where the route takes one (the admin must name it). */
const scopeOf = new Map<string, string>();

beforeAll(async () => {
  const doc = (await http('GET', '/openapi.json')).body;
  const merchant = await http('POST', '/api/admin/merchants', { token: adminToken(), body: { name: 'Paging Merchant', contactEmail: 'paging@example.com' } });
  expect(merchant.status).toBe(201);
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>)) {
    const query = ops.get?.parameters?.filter((p) => p.in === 'query').map((p) => p.name) ?? [];
    if (!query.includes('page')) continue;
    pagedRoutes.push(path);
    scopeOf.set(path, query.includes('merchantId') ? `merchantId=${merchant.body.id}&` : '');
  }
});

describe('page and pageSize are held to their int32 range on every paged collection', () => {
  it('the route table has paged collections, the admin and API-key ones among them', () => {
    expect(pagedRoutes.length).toBeGreaterThan(10);
    expect(pagedRoutes).toEqual(expect.arrayContaining(['/api/ApiKeys', '/api/admin/merchants', '/api/Members']));
  });

  it('a page past int32, 0, or a pageSize over 200 is 400 naming the parameter', async () => {
    const failures: string[] = [];
    for (const path of pagedRoutes) {
      const concrete = path.replace(/\{\w+\}/g, SOME_UUID);
      for (const [query, field] of [
        [`page=${MAX_INT32 + 1}`, 'page'],
        [`page=${2 ** 32 + 1}`, 'page'],
        ['page=0', 'page'],
        ['pageSize=201', 'pageSize'],
      ]) {
        const res = await http('GET', `${concrete}?${scopeOf.get(path)}${query}`, { token: adminToken() });
        if (res.status !== 400 || !res.body?.errors?.[field] || !res.body?.traceId) failures.push(`${path}?${query}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }
    expect(failures).toEqual([]);
  });

  // Regression: page and pageSize went through Number(), so `0x10`, `1e1`, `0b11`, ` 3` and `1.0`
  // were taken as integers (page=0x2 answered page 2).
  it('a page or pageSize that is not decimal digits is 400 naming the parameter', async () => {
    const failures: string[] = [];
    // Every route with two of the values (in turn, so every value meets both fields): the
    // parameters share one schema, and all of them on every route would spend the admin token's
    // rate limit, which the next test then meets.
    const values = ['0x2', '1e1', '0b11', '%202', '1.0', '+2'];
    for (const [i, path] of pagedRoutes.entries()) {
      const concrete = path.replace(/\{\w+\}/g, SOME_UUID);
      for (const [field, value] of [['page', values[i % values.length]], ['pageSize', values[(i + 3) % values.length]]] as const) {
        const res = await http('GET', `${concrete}?${scopeOf.get(path)}${field}=${value}`, { token: adminToken() });
        if (res.status !== 400 || !res.body?.errors?.[field]) failures.push(`${path}?${field}=${value}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
    const plain = await http('GET', `/api/admin/merchants?page=02&pageSize=3`, { token: adminToken() });
    expect([plain.status, plain.body.page, plain.body.pageSize]).toEqual([200, 2, 3]);
  });

  // Regression: query parameter names were case-sensitive (paths are not), so `PageSize=1` and
  // `Status=Active` were ignored: a full page, an unfiltered list.
  it('matches query parameter names case-insensitively, as paths', async () => {
    const merchant = await http('POST', '/api/admin/merchants', { token: adminToken(), body: { name: 'Query Case Merchant', contactEmail: 'query-case@example.com' } });
    const id = merchant.body.id as string;
    for (const name of ['one', 'two', 'three']) {
      expect((await http('POST', '/api/Products', { token: adminToken(), body: { merchantId: id, name } })).status).toBe(201);
    }
    const upper = await http('GET', `/api/Products?MerchantId=${id}&PageSize=1&PAGE=2`, { token: adminToken() });
    expect([upper.status, upper.body.page, upper.body.pageSize, upper.body.items?.map((p: any) => p.name)]).toEqual([200, 2, 1, ['two']]);
    const filtered = await http('GET', `/api/Subscriptions?merchantId=${id}&Status=Nope`, { token: adminToken() });
    expect([filtered.status, Object.keys(filtered.body.errors ?? {})]).toEqual([400, ['status']]);
    const twice = await http('GET', `/api/Products?merchantId=${id}&pageSize=1&PageSize=2`, { token: adminToken() });
    expect([twice.status, twice.body.errors]).toEqual([400, { pageSize: ['Must be given once.'] }]);
    // The same name twice likewise (it said what the value must be, "Must be one of ...").
    const status = await http('GET', `/api/Subscriptions?merchantId=${id}&status=Active&status=Paused`, { token: adminToken() });
    expect([status.status, status.body.errors, status.body.traceId]).toEqual([400, { status: ['Must be given once.'] }, expect.any(String)]);
  });

  it('the last int32 page is an empty page of the collection (or 404 for an unknown parent), never a 500', async () => {
    const failures: string[] = [];
    for (const path of pagedRoutes) {
      const hasParent = path.includes('{');
      const res = await http('GET', `${path.replace(/\{\w+\}/g, SOME_UUID)}?${scopeOf.get(path)}page=${MAX_INT32}&pageSize=200`, { token: adminToken() });
      const ok = hasParent
        ? res.status === 404 || (res.status === 200 && res.body.items.length === 0)
        : res.status === 200 && res.body.items.length === 0 && res.body.page === MAX_INT32 && res.body.pageSize === 200 && res.body.hasNextPage === false;
      if (!ok) failures.push(`${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    }
    expect(failures).toEqual([]);
  });
});
