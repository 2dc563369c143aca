import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { isNonPublicAddress, publicOnlyLookup } from '@billing/service-runtime';
import type { AttemptOutcome } from './delivery.js';
import { parseRetryAfter } from './retry-policy.js';

/** How much of a response body an attempt keeps. */
export const RESPONSE_BODY_LIMIT = 1024;
/** Reading stops (and the connection is dropped) past this many bytes of response body. */
const RESPONSE_READ_LIMIT = 64 * 1024;

export interface HttpSenderOptions {
  /** A 2xx must arrive, body included, within this many milliseconds. */
  timeoutMs: number;
  /** Refuse URLs that are not https or that resolve to loopback, private or link-local addresses. */
  production: boolean;
  userAgent?: string;
}

/**
 * POSTs webhook bodies. Redirects are not followed (a 3xx is a failed attempt). In production,
 * every connection's address is checked as it is resolved, so DNS rebinding cannot reach an
 * internal address between a check and the connect. Keep-alive agents reuse connections per
 * endpoint.
 */
export class HttpSender {
  private readonly agents: { http: http.Agent; https: https.Agent };
  private readonly userAgent: string;
  private readonly targets = new Map<string, { secure: boolean; options: http.RequestOptions } | string>();

  constructor(private readonly opts: HttpSenderOptions) {
    const agentOpts = { keepAlive: true, keepAliveMsecs: 10_000, maxFreeSockets: 64, scheduling: 'lifo' as const };
    this.agents = { http: new http.Agent(agentOpts), https: new https.Agent(agentOpts) };
    this.userAgent = opts.userAgent ?? 'billing-platform-webhooks/1';
  }

  async send(rawUrl: string, signature: Record<string, string>, body: string): Promise<AttemptOutcome> {
    const started = performance.now();
    const target = this.target(rawUrl);
    if (typeof target === 'string') return { ok: false, statusCode: null, durationMs: 0, error: target, responseBody: null };
    const { secure, options } = target;
    const payload = Buffer.from(body);

    return new Promise<AttemptOutcome>((resolve) => {
      let settled = false;
      const finish = (outcome: Omit<AttemptOutcome, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...outcome, durationMs: Math.round(performance.now() - started) });
      };
      const req = (secure ? https : http).request(
        {
          ...options,
          method: 'POST',
          agent: secure ? this.agents.https : this.agents.http,
          lookup: this.opts.production ? publicOnlyLookup : undefined,
          headers: {
            'content-type': 'application/json',
            'content-length': payload.length,
            'user-agent': this.userAgent,
            ...signature,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let kept = 0;
          let read = 0;
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (kept < RESPONSE_BODY_LIMIT) {
              chunks.push(chunk);
              kept += chunk.length;
            }
            if (read > RESPONSE_READ_LIMIT) res.destroy();
          });
          const done = () => {
            const status = res.statusCode ?? 0;
            const ok = status >= 200 && status < 300;
            const retryAfter = status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after']) : undefined;
            finish({
              ok,
              statusCode: status,
              error: status >= 300 && status < 400 ? 'Redirects are not followed.' : null,
              responseBody: cleanText(Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8')),
              ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
            });
          };
          res.on('end', done);
          res.on('close', done);
          res.on('error', done);
        },
      );
      const timer = setTimeout(() => {
        finish({ ok: false, statusCode: null, error: `No 2xx response within ${this.opts.timeoutMs} ms.`, responseBody: null });
        req.destroy();
      }, this.opts.timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => finish({ ok: false, statusCode: null, error: describeError(e), responseBody: null }));
      req.end(payload);
    });
  }

  /** Request options of a URL (parsed once per URL; endpoints are few), or why it is refused. */
  private target(rawUrl: string): { secure: boolean; options: http.RequestOptions } | string {
    let hit = this.targets.get(rawUrl);
    if (hit === undefined) {
      hit = this.parseTarget(rawUrl);
      if (this.targets.size >= 10_000) this.targets.clear();
      this.targets.set(rawUrl, hit);
    }
    return hit;
  }

  private parseTarget(rawUrl: string): { secure: boolean; options: http.RequestOptions } | string {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return 'Invalid URL.';
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'Only http and https URLs are delivered to.';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (this.opts.production) {
      if (url.protocol !== 'https:') return 'Only https URLs are delivered to in production.';
      // Literal addresses skip the resolver, so they are checked here.
      if (isIP(host) && isNonPublicAddress(host)) return 'The URL resolves to a loopback, private or link-local address.';
    }
    const secure = url.protocol === 'https:';
    return { secure, options: { protocol: url.protocol, hostname: host, port: url.port || (secure ? 443 : 80), path: `${url.pathname}${url.search}` } };
  }

  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}

function describeError(e: NodeJS.ErrnoException): string {
  if (e.code === 'ENONPUBLIC') return 'The URL resolves to a loopback, private or link-local address.';
  return cleanText(e.code ? `${e.code}: ${e.message}` : e.message).slice(0, 500);
}

/** Postgres text cannot hold NUL characters. */
const cleanText = (s: string) => s.replace(/\u0000/g, '');
