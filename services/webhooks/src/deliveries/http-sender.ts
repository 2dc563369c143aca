import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { AttemptError } from '@billing/contracts';
import { bareHost, isLoopbackName, judgeAddress, publicOnlyLookup } from '@billing/service-runtime';
import { injectTraceHeaders, propagatesContextManually } from '@billing/telemetry';
import type { AttemptOutcome } from './delivery.js';
import { parseRetryAfter } from './retry-policy.js';

/** How much of a response body an attempt keeps. */
export const RESPONSE_BODY_LIMIT = 1024;
/** Reading stops (and the connection is dropped) past this many bytes of response body. */
const RESPONSE_READ_LIMIT = 64 * 1024;

export interface HttpSenderOptions {
  /** A 2xx must arrive, body included, within this many milliseconds. */
  timeoutMs: number;
  /** Apply the egress address policy (service-runtime's `judgeAddress`) and refuse plain http. */
  production: boolean;
  userAgent?: string;
}

/**
 * POSTs webhook bodies. Redirects are not followed (a 3xx is a failed attempt). In production,
 * the egress address policy judges every address a connection is made to: a literal host before
 * connecting, a name's resolver answers in the `lookup` hook the socket connects with (so DNS
 * rebinding cannot reach an internal address between a check and the connect). A refused
 * address is never contacted. Failures are recorded as categories, never as error text.
 * Keep-alive agents reuse connections per endpoint.
 */
export class HttpSender {
  private readonly agents: { http: http.Agent; https: https.Agent };
  private readonly userAgent: string;
  private readonly targets = new Map<string, { secure: boolean; options: http.RequestOptions } | AttemptError>();

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
            // The event's trace context; when spans are recorded the http instrumentation sets it instead (naming the client span).
            ...(propagatesContextManually() ? injectTraceHeaders() : {}),
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
              error: ok ? null : 'http_status',
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
        finish({ ok: false, statusCode: null, error: 'timeout', responseBody: null });
        req.destroy();
      }, this.opts.timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => finish({ ok: false, statusCode: null, error: errorCategory(e), responseBody: null }));
      req.end(payload);
    });
  }

  /** Request options of a URL (parsed once per URL; endpoints are few), or why it is refused. */
  private target(rawUrl: string): { secure: boolean; options: http.RequestOptions } | AttemptError {
    let hit = this.targets.get(rawUrl);
    if (hit === undefined) {
      hit = this.parseTarget(rawUrl);
      if (this.targets.size >= 10_000) this.targets.clear();
      this.targets.set(rawUrl, hit);
    }
    return hit;
  }

  /** Identity validates URLs when they are configured; a URL refused here never reached a socket. */
  private parseTarget(rawUrl: string): { secure: boolean; options: http.RequestOptions } | AttemptError {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return 'address_refused';
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'address_refused';
    const host = bareHost(url.hostname);
    if (this.opts.production) {
      if (url.protocol !== 'https:') return 'address_refused';
      // Node never calls the lookup hook for a literal, so literals are judged here by the same rule.
      if (isIP(host) && !judgeAddress(host).allowed) return 'address_refused';
      if (isLoopbackName(host)) return 'address_refused';
    }
    const secure = url.protocol === 'https:';
    return { secure, options: { protocol: url.protocol, hostname: host, port: url.port || (secure ? 443 : 80), path: `${url.pathname}${url.search}` } };
  }

  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME', 'ENODATA', 'ESERVFAIL']);
const TIMEOUT_CODES = new Set(['ETIMEDOUT', 'ESOCKETTIMEDOUT', 'ECONNABORTED']);
/** The receiver took the connection and then dropped it before answering. */
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE']);

/** The category of a connection-level failure (see `ATTEMPT_ERRORS`). */
export function errorCategory(e: NodeJS.ErrnoException): AttemptError {
  const code = e.code ?? '';
  if (code === 'ENONPUBLIC') return 'address_refused';
  if (DNS_CODES.has(code)) return 'dns_error';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (RESET_CODES.has(code) || e.message === 'socket hang up') return 'connection_reset';
  if (/^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|HOSTNAME_MISMATCH|ERR_OSSL)/.test(code) || /\b(ssl|tls)\b|certificate/i.test(e.message)) return 'tls_error';
  return 'connection_refused';
}

/** Postgres text cannot hold NUL characters. */
const cleanText = (s: string) => s.replace(/\u0000/g, '');
