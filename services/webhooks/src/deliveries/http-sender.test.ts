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
      if (req.url === '/reset') return req.socket.resetAndDestroy();
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
    expect(out).toMatchObject({ ok: false, statusCode: 302, error: 'http_status' });
    expect(seen.filter((s) => s.path === '/ok').length).toBe(before);
  });

  it('reads Retry-After on a 429 and keeps the first 1 KiB of a body', async () => {
    expect(await sender.send(`${base}/busy`, headers, '{}')).toMatchObject({ ok: false, statusCode: 429, error: 'http_status', retryAfterMs: 7000, responseBody: 'slow down' });
    const big = await sender.send(`${base}/big`, headers, '{}');
    expect(big.responseBody).toHaveLength(1024);
  });

  it('fails an attempt with no 2xx within the timeout', async () => {
    const out = await sender.send(`${base}/slow`, headers, '{}');
    expect(out).toMatchObject({ ok: false, statusCode: null, error: 'timeout', responseBody: null });
  });

  it('records a refused connection, a bad certificate and an unknown host as categories, not error text', async () => {
    expect(await sender.send('http://127.0.0.1:1/x', headers, '{}')).toMatchObject({ ok: false, statusCode: null, error: 'connection_refused', responseBody: null });
    expect(await sender.send('http://nowhere.invalid/x', headers, '{}')).toMatchObject({ ok: false, error: 'dns_error' });
    // Accepted, then reset before any response: not a refusal.
    expect(await sender.send(`${base}/reset`, headers, '{}')).toMatchObject({ ok: false, statusCode: null, error: 'connection_reset', responseBody: null });
    // A plain-http server answering a TLS handshake.
    expect(await sender.send(`${base.replace('http:', 'https:')}/ok`, headers, '{}')).toMatchObject({ ok: false, error: 'tls_error' });
  });

  it('in production, refuses plain http and every loopback or private form, literal or resolved, without connecting', async () => {
    const prod = new HttpSender({ timeoutMs: 300, production: true });
    let connections = 0;
    const count = () => connections++;
    server.on('connection', count);
    const port = new URL(base).port;
    const refused = [
      `${base}/ok`,
      `https://127.0.0.1:${port}/ok`,
      `https://[::1]:${port}/ok`,
      `https://[::ffff:127.0.0.1]:${port}/ok`,
      `https://[::ffff:7f00:1]:${port}/ok`,
      `https://[::127.0.0.1]:${port}/ok`,
      `https://[64:ff9b::7f00:1]:${port}/ok`,
      `https://[2002:7f00:1::]:${port}/ok`,
      `https://0x7f000001:${port}/ok`,
      `https://localhost:${port}/ok`,
      `https://localhost.:${port}/ok`,
    ];
    for (const url of refused) expect(await prod.send(url, headers, '{}'), url).toMatchObject({ ok: false, statusCode: null, error: 'address_refused', responseBody: null });
    server.off('connection', count);
    expect(connections).toBe(0);
  });
});
