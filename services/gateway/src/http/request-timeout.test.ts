import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createLogger } from '@billing/service-runtime';
import { propagatesContextManually, startTelemetry, stopTelemetry } from '@billing/telemetry';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Authenticator } from '../auth/authenticator.js';
import { buildHttpServer } from './server.js';

/**
 * Regression for: a client that announced `Content-Length: 100` and sent 9 bytes kept its
 * connection (and the gateway's socket) open for more than 340 s. Now HTTP_REQUEST_TIMEOUT_MS
 * bounds receiving a request, header section and body, and the client is answered 408.
 */
const TIMEOUT_MS = 300;
let app: FastifyInstance | undefined;

async function serve(keepAliveTimeoutMs?: number): Promise<number> {
  const built = buildHttpServer({
    logger: createLogger('request-timeout-test', 'silent'),
    authenticator: new Authenticator('a'.repeat(43), undefined as never, undefined as never, {}),
    requestTimeoutMs: TIMEOUT_MS,
    headersTimeoutMs: TIMEOUT_MS,
    keepAliveTimeoutMs,
  });
  app = built.app;
  app.post('/slow', async () => {
    await new Promise((r) => setTimeout(r, TIMEOUT_MS * 2));
    return { ok: true };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return (app.server.address() as AddressInfo).port;
}

/** Writes `bytes` and waits for the server to close the connection: what it answered and when. */
function exchange(port: number, bytes: string): Promise<{ status: number; body: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      resolve({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4), ms: Date.now() - started });
    });
  });
}

const SLOW_BODY = 'POST /slow HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":"12"';
const SLOW_HEADERS = 'POST /slow HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n';

function expectTimedOut(res: { status: number; body: string; ms: number }): void {
  expect(res.status).toBe(408);
  expect(JSON.parse(res.body)).toMatchObject({ type: 'https://docs.billing-platform.dev/problems/request-timeout', title: 'Request timeout.', status: 408, traceId: expect.stringMatching(/^[0-9a-f]{32}$/) });
  expect(res.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
  // Node looks for expired requests every tenth of the timeout (at least 50 ms): well under 2 s here.
  expect(res.ms).toBeLessThan(2_000);
}

afterEach(async () => {
  await app?.close();
  app = undefined;
});

afterAll(async () => {
  await stopTelemetry();
});

describe('HTTP_REQUEST_TIMEOUT_MS', () => {
  it('answers 408 and closes the connection of a body that never finishes', async () => {
    expectTimedOut(await exchange(await serve(), SLOW_BODY));
  });

  it('answers 408 to a header section that never finishes', async () => {
    expectTimedOut(await exchange(await serve(), SLOW_HEADERS));
  });

  it('bounds receiving only: a handler slower than the timeout still answers', async () => {
    const res = await exchange(await serve(), 'POST /slow HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: true });
  });

  it('applies to the server the gateway builds itself when it carries trace context without span recording', async () => {
    await startTelemetry('request-timeout-test');
    expect(propagatesContextManually()).toBe(true);
    expectTimedOut(await exchange(await serve(), SLOW_BODY));
  });
});

// HTTP_KEEP_ALIVE_TIMEOUT_MS: fastify's 72 s was fixed in code.
describe('HTTP_KEEP_ALIVE_TIMEOUT_MS', () => {
  const KEPT = 'POST /slow HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
  const closesAfter = async (keepAliveMs: number) => {
    const res = await exchange(await serve(keepAliveMs), KEPT);
    expect(res.status).toBe(200);
    // Answered after the handler's 2 × TIMEOUT_MS, then closed once idle for the keep-alive timeout.
    expect(res.ms).toBeGreaterThanOrEqual(TIMEOUT_MS * 2 + keepAliveMs - 50);
    expect(res.ms).toBeLessThan(TIMEOUT_MS * 2 + keepAliveMs + 5_000);
  };

  it('closes an idle kept-alive connection after the configured time', async () => {
    await closesAfter(500);
  });

  it('applies to the server the gateway builds itself', async () => {
    await startTelemetry('request-timeout-test');
    expect(propagatesContextManually()).toBe(true);
    await closesAfter(500);
  });
});
