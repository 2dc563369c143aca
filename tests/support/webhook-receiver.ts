import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One POST the receiver got. */
export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed body when its signature verified with the path's secret (standardwebhooks), else undefined. */
  payload: any;
  verified: boolean;
  receivedAt: number;
}

/** How the receiver answers a request: `n` counts requests to that path, from 1. */
export type Responder = (req: ReceivedWebhook, n: number) => { status: number; headers?: Record<string, string>; body?: string; delayMs?: number };

/**
 * A real local HTTP server standing in for a merchant's webhook endpoint. Each path is one
 * endpoint: give it the API key's signing secret and every request is verified with the
 * `standardwebhooks` library; program its answers per path (default 204).
 */
export interface WebhookReceiver {
  url(path: string): string;
  /** Verify requests to `path` with this `whsec_...` secret. */
  secret(path: string, secret: string): void;
  respond(path: string, responder: Responder): void;
  received(path?: string): ReceivedWebhook[];
  /** Most requests to `path` that were open (received, not yet answered) at one time. */
  maxOpen(path: string): number;
  /** Waits until `predicate` holds for the requests to `path` (default 20 s), and returns them. */
  waitFor(path: string, predicate: (reqs: ReceivedWebhook[]) => boolean, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const all: ReceivedWebhook[] = [];
  const secrets = new Map<string, Webhook>();
  const responders = new Map<string, Responder>();
  const counts = new Map<string, number>();
  const open = new Map<string, number>();
  const maxOpen = new Map<string, number>();

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const body = Buffer.concat(chunks).toString('utf8');
      let payload: unknown;
      let verified = false;
      const wh = secrets.get(path);
      if (wh) {
        try {
          payload = wh.verify(body, req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
      }
      const received: ReceivedWebhook = { path, headers: req.headers, body, payload, verified, receivedAt: Date.now() };
      all.push(received);
      const n = (counts.get(path) ?? 0) + 1;
      counts.set(path, n);
      const answer = responders.get(path)?.(received, n) ?? { status: 204 };
      open.set(path, (open.get(path) ?? 0) + 1);
      maxOpen.set(path, Math.max(maxOpen.get(path) ?? 0, open.get(path)!));
      res.on('close', () => open.set(path, open.get(path)! - 1));
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, answer.headers);
        res.end(answer.body);
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;

  const received = (path?: string) => (path ? all.filter((r) => r.path === path) : [...all]);
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    secret: (path, secret) => secrets.set(path, new Webhook(secret)),
    respond: (path, responder) => responders.set(path, responder),
    received,
    maxOpen: (path) => maxOpen.get(path) ?? 0,
    async waitFor(path, predicate, timeoutMs = 20_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const reqs = received(path);
        if (predicate(reqs)) return reqs;
        if (Date.now() > end) throw new Error(`webhook receiver: condition not met for ${path} within ${timeoutMs} ms; got ${reqs.length} request(s): ${reqs.map((r) => r.body.slice(0, 120)).join(' | ')}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
