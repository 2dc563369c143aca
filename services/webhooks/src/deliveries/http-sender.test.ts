import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpSender } from './http-sender.js';

let server: Server;
let base: string;
const seen: { path: string; headers: Record<string, unknown>; body: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() });
      if (req.url === '/ok') return res.writeHead(200).end('thanks');
      if (req.url === '/redirect') return res.writeHead(302, { location: '/ok' }).end();
      if (req.url === '/busy') return res.writeHead(429, { 'retry-after': '7' }).end('slow down');
      if (req.url === '/big') return res.writeHead(500).end('x'.repeat(5000));
      if (req.url === '/slow') return setTimeout(() => res.writeHead(200).end(), 1000);
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const headers = { 'webhook-id': 'evt', 'webhook-timestamp': '1', 'webhook-signature': 'v1,abc' };

describe('HttpSender', () => {
  const sender = new HttpSender({ timeoutMs: 300, production: false });

  it('POSTs the body as JSON with the signature headers; a 2xx is success', async () => {
    const out = await sender.send(`${base}/ok`, headers, '{"a":1}');
    expect(out).toMatchObject({ ok: true, statusCode: 200, error: null, responseBody: 'thanks' });
    const req = seen.find((s) => s.path === '/ok')!;
    expect(req.body).toBe('{"a":1}');
    expect(req.headers).toMatchObject({ 'content-type': 'application/json', ...headers });
  });

  it('does not follow redirects', async () => {
    const before = seen.filter((s) => s.path === '/ok').length;
    const out = await sender.send(`${base}/redirect`, headers, '{}');
    expect(out).toMatchObject({ ok: false, statusCode: 302, error: 'Redirects are not followed.' });
    expect(seen.filter((s) => s.path === '/ok').length).toBe(before);
  });

  it('reads Retry-After on a 429 and keeps the first 1 KiB of a body', async () => {
    expect(await sender.send(`${base}/busy`, headers, '{}')).toMatchObject({ ok: false, statusCode: 429, retryAfterMs: 7000, responseBody: 'slow down' });
    const big = await sender.send(`${base}/big`, headers, '{}');
    expect(big.responseBody).toHaveLength(1024);
  });

  it('fails an attempt with no 2xx within the timeout', async () => {
    const out = await sender.send(`${base}/slow`, headers, '{}');
    expect(out).toMatchObject({ ok: false, statusCode: null, error: 'No 2xx response within 300 ms.' });
  });

  it('reports a refused connection as an error', async () => {
    const out = await sender.send('http://127.0.0.1:1/x', headers, '{}');
    expect(out.ok).toBe(false);
    expect(out.error).toMatch(/ECONNREFUSED/);
  });

  it('in production, refuses plain http and hosts resolving to loopback or private addresses', async () => {
    const prod = new HttpSender({ timeoutMs: 300, production: true });
    const count = seen.length;
    expect(await prod.send(`${base}/ok`, headers, '{}')).toMatchObject({ ok: false, statusCode: null, error: 'Only https URLs are delivered to in production.' });
    expect(await prod.send('https://127.0.0.1/ok', headers, '{}')).toMatchObject({ ok: false, error: 'The URL resolves to a loopback, private or link-local address.' });
    expect(await prod.send('https://[::1]/ok', headers, '{}')).toMatchObject({ ok: false, error: 'The URL resolves to a loopback, private or link-local address.' });
    expect(await prod.send('https://localhost/ok', headers, '{}')).toMatchObject({ ok: false, error: 'The URL resolves to a loopback, private or link-local address.' });
    expect(seen.length).toBe(count);
  });
});
