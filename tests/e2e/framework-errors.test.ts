import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { adminToken, gateway } from '../support/e2e.js';
import { inject } from 'vitest';

/**
 * Regression for: errors raised before a handler runs (unknown route or method, malformed JSON,
 * 413, 415) had no `traceId`, and header-level errors (431, bad header bytes) were fastify's own
 * JSON rather than problem details. Every response carries its trace id in `X-Trace-Id`.
 */
const http = gateway();
const TRACE_ID = /^[0-9a-f]{32}$/;

function expectProblem(res: { status: number; headers: Record<string, string>; body: any }, status: number) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({ status, type: expect.any(String), title: expect.any(String), detail: expect.any(String) });
  expect(res.body.traceId).toMatch(TRACE_ID);
  expect(res.headers['x-trace-id']).toBe(res.body.traceId);
}

/** Sends bytes on a raw socket (what fetch refuses to send) and parses the one response. */
function rawRequest(bytes: Buffer): Promise<{ status: number; headers: Record<string, string>; body: any }> {
  const url = new URL(inject('gatewayUrl'));
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...headerLines] = head.split('\r\n');
      const headers = Object.fromEntries(headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) });
    });
  });
}

describe('errors raised by the framework are problem details with a trace id', () => {
  it('an unknown route is 404', async () => {
    expectProblem(await http('GET', '/api/NoSuchThing'), 404);
  });

  it('an unknown method on a known route is 404', async () => {
    expectProblem(await http('PUT', '/api/Products', { token: adminToken(), body: {} }), 404);
  });

  it('malformed JSON is 400', async () => {
    expectProblem(await http('POST', '/api/admin/merchants', { token: adminToken(), body: '{"name": ', headers: { 'content-type': 'application/json' } }), 400);
  });

  it('a body nested thousands deep is 400, even on an anonymous endpoint (it was a 500)', async () => {
    const deep = (n: number) => `{"d":"x","s":"y","extra":${'['.repeat(n)}${']'.repeat(n)}}`;
    for (const body of [deep(5_000), deep(50_000), '['.repeat(10_000) + ']'.repeat(10_000)]) {
      const res = await http('POST', '/api/Checkout/sessions/resolve', { body, headers: { 'content-type': 'application/json' } });
      expectProblem(res, 400);
      expect(JSON.stringify(res.body.errors)).toContain('nested at most 32');
    }
  });

  it('a body over 1 MiB is 413', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) });
    expectProblem(await http('POST', '/api/admin/merchants', { token: adminToken(), body: big, headers: { 'content-type': 'application/json' } }), 413);
  });

  it('an unsupported Content-Type is 415', async () => {
    expectProblem(await http('POST', '/api/admin/merchants', { token: adminToken(), body: 'name=x', headers: { 'content-type': 'text/plain' } }), 415);
  });

  it('a header section over the limit is 431 (raised by the HTTP parser, before any route)', async () => {
    const res = await rawRequest(Buffer.from(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`));
    expectProblem(res, 431);
  });

  it('bytes no header may hold are 400 (raised by the HTTP parser)', async () => {
    const res = await rawRequest(Buffer.concat([Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a'), Buffer.from([0x01, 0x7f]), Buffer.from('b\r\n\r\n')]));
    expectProblem(res, 400);
  });

  it('a path that is not percent-encoded UTF-8 is 400 (raised by the router; it was fastify JSON without a trace id)', async () => {
    for (const path of ['/api/Transactions/%FF', '/api/Members/%E0%A4%A', '/api/Products/%C0%AF/questions']) {
      const res = await http('GET', path, { token: adminToken() });
      expectProblem(res, 400);
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });

  it('a path segment longer than any id is 404 (raised by the router; it was a 414 in fastify JSON)', async () => {
    expectProblem(await http('GET', `/api/Members/${'a'.repeat(2_000)}`, { token: adminToken() }), 404);
    expectProblem(await http('GET', `/api/Products/${'b'.repeat(501)}/questions`, { token: adminToken() }), 404);
  });

  it('a header name with a space is 400 (raised by the HTTP parser)', async () => {
    expectProblem(await rawRequest(Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n')), 400);
  });

  it('a body in a charset other than UTF-8 is 415 (the charset was ignored: Latin-1 bytes were a 400, ASCII ones accepted)', async () => {
    for (const type of ['application/json; charset=iso-8859-1', 'application/json;charset="utf-16"']) {
      const res = await http('POST', '/api/admin/merchants', { token: adminToken(), body: JSON.stringify({ name: 'Café', contactEmail: 'a@example.com' }), headers: { 'content-type': type } });
      expectProblem(res, 415);
      expect(res.body.detail).toContain('UTF-8');
    }
    const utf8 = await http('POST', '/api/admin/merchants', { token: adminToken(), body: JSON.stringify({ name: 'Café', contactEmail: 'cafe@example.com' }), headers: { 'content-type': 'application/json; charset=UTF-8' } });
    expect(utf8.status).toBe(201);
  });
});

describe('a header that carries one value, given twice (Node kept the first Authorization and Content-Type and joined two Idempotency-Keys into "a, b")', () => {
  const post = (headers: string[], body = '{}') =>
    rawRequest(Buffer.from(`POST /api/admin/merchants HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers.join('\r\n')}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));

  it('two Authorization headers are 401, even when both hold a valid credential', async () => {
    const res = await post([`Authorization: Bearer ${adminToken()}`, `Authorization: Bearer ${adminToken()}`, 'Content-Type: application/json']);
    expectProblem(res, 401);
    expect(res.body.detail).toContain('one Authorization header');
  });

  it('two Idempotency-Key headers are 400 naming the header on a route that takes it, and ignored on one that does not', async () => {
    const res = await rawRequest(
      Buffer.from(`POST /api/Subscriptions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${adminToken()}\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`),
    );
    expectProblem(res, 400);
    expect(res.body.errors).toEqual({ 'Idempotency-Key': ['Given more than once; send it once.'] });
    // Merchant creation (like member creation, webhook replay and deep-link resolve) takes no
    // Idempotency-Key: a client library that adds one to every POST, twice, was refused 400.
    const body = JSON.stringify({ name: 'Two keys', contactEmail: `two-keys-${Date.now()}@example.com` });
    const ignored = await post([`Authorization: Bearer ${adminToken()}`, 'Idempotency-Key: a', 'Idempotency-Key: b', 'Content-Type: application/json'], body);
    expect(ignored.status).toBe(201);
  });

  it('two Content-Type headers are 400 naming the header', async () => {
    const res = await post([`Authorization: Bearer ${adminToken()}`, 'Content-Type: application/json', 'Content-Type: text/plain']);
    expectProblem(res, 400);
    expect(res.body.errors).toEqual({ 'Content-Type': ['Given more than once; send it once.'] });
  });
});

describe('every response carries its trace id in X-Trace-Id', () => {
  it('a success without traceparent gets a fresh trace id', async () => {
    const res = await http('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.headers['x-trace-id']).toMatch(TRACE_ID);
  });

  it("a request with traceparent keeps the caller's trace id, in the header and in a problem", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const headers = { traceparent: `00-${traceId}-00f067aa0ba902b7-01` };
    expect((await http('GET', '/health', { headers })).headers['x-trace-id']).toBe(traceId);
    const problem = await http('GET', '/api/Products', { headers });
    expect(problem.status).toBe(401);
    expect(problem.body.traceId).toBe(traceId);
    expect(problem.headers['x-trace-id']).toBe(traceId);
  });
});
