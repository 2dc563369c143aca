import { createHash, randomUUID } from 'node:crypto';
import { DomainError } from '@billing/contracts';
import { recordIdempotencyReplay } from '@billing/telemetry';
import type { Logger } from '@billing/service-runtime';
import { credentialId, merchantOf, type Principal } from '../auth/principal.js';
import { HTTP_STATUS } from '../http/problem.js';
import type { RouteResult } from '../http/route.js';
import { REPLAYED_HEADERS, unknownOutcome, type StoredResponse } from './idempotency-record.js';
import type { IdempotencyStore } from './idempotency-store.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'idempotent-replayed';
export const MAX_KEY_LENGTH = 255;

export interface IdempotencyOptions {
  /** How long a key is kept (24 h by contract); after it the key may be reused. */
  retentionMs: number;
  /** How long a claim may stay in flight before its claimer is presumed dead (outcome unknown). */
  leaseMs: number;
  clock?: () => Date;
}

/** What the engine needs to know of an HTTP request. */
export interface IdempotentRequest {
  method: string;
  /** The request target (path and query) as received. */
  url: string;
  /** Value of the Idempotency-Key header, as Node delivers it. */
  key: string | string[] | undefined;
  /** The body bytes exactly as received; undefined when there was no body. */
  rawBody: Buffer | undefined;
  /** Undefined on an anonymous route. */
  principal: Principal | undefined;
  /** The merchant a credential without one of its own (the platform admin) acts for, when known. */
  actingFor?: string;
  traceId?: string;
}

/**
 * Scope of a key (contract §3: (merchant, key)): the credential's merchant, or the merchant the
 * platform admin acts for, so that a key the admin repeats on a merchant's resource replays the
 * merchant's outcome instead of running again; the admin acting for no known merchant (and any
 * other credential) has a scope of its own.
 */
export function scopeOf(principal: Principal | undefined, actingFor?: string): string {
  if (!principal) return 'anonymous';
  return merchantOf(principal) ?? actingFor ?? credentialId(principal);
}

/** Path as compared: without the query, lower-cased (paths match case-insensitively), no trailing slash. */
export function normalisePath(url: string): string {
  const path = url.split('?')[0].toLowerCase();
  return path.length > 1 ? path.replace(/\/+$/, '') : path;
}

/** SHA-256 (hex) over method, normalised path and SHA-256 of the raw body. */
export function fingerprintOf(method: string, path: string, rawBody: Buffer | undefined): string {
  const bodyHash = createHash('sha256').update(rawBody ?? Buffer.alloc(0)).digest('hex');
  return createHash('sha256').update(`${method.toUpperCase()} ${path}\n${bodyHash}`).digest('hex');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header value as the client wrote it: Node hands header bytes over one character per byte
 * (latin1), so a UTF-8 "é" arrives as two characters; bytes that are not plain ASCII are read as
 * UTF-8. Undefined when they are not UTF-8.
 */
function headerText(value: string): string | undefined {
  if (!/[^\x00-\x7f]/.test(value)) return value;
  try {
    return utf8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return undefined;
  }
}

/**
 * The Idempotency-Key of a request as the client wrote it (its UTF-8 read as such), or the 400
 * that refuses it before anything runs. Its length is counted in characters (code points).
 */
export function parseIdempotencyKey(value: string | string[] | undefined): string {
  const sent = Array.isArray(value) ? value.join(', ') : value;
  const refuse = (message: string) => DomainError.validation({ 'Idempotency-Key': [message] }, message);
  if (sent === undefined) throw refuse('The Idempotency-Key header is required for this operation.');
  const key = headerText(sent);
  if (key === undefined) throw refuse('The Idempotency-Key header must be UTF-8 text.');
  if (key.trim() === '') throw refuse('The Idempotency-Key header must not be empty.');
  if ([...key].length > MAX_KEY_LENGTH) throw refuse(`The Idempotency-Key header must be at most ${MAX_KEY_LENGTH} characters.`);
  return key;
}

/** Status an attempt ended with when its handler threw. */
function statusOfError(e: unknown): number {
  return e instanceof DomainError ? HTTP_STATUS[e.code] : 500;
}

/**
 * Runs requests under an Idempotency-Key (interface.md "Idempotency-Key rules", contract.md §3):
 * the first request with a key claims it atomically and runs; duplicates get its stored
 * response (2xx, 5xx as "outcome unknown"), a 409 while it runs, or a 409 when their request
 * differs; a 4xx outcome frees the key for the same request.
 */
export class IdempotencyEngine {
  private readonly clock: () => Date;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly logger: Logger,
    private readonly opts: IdempotencyOptions,
  ) {
    this.clock = opts.clock ?? (() => new Date());
  }

  async run(request: IdempotentRequest, run: () => Promise<RouteResult>): Promise<RouteResult> {
    const key = parseIdempotencyKey(request.key);
    const scope = scopeOf(request.principal, request.actingFor);
    const method = request.method.toUpperCase();
    const fingerprint = fingerprintOf(method, normalisePath(request.url), request.rawBody);
    // The problem's instance, here and in a record left in flight (read back once its lease has
    // run out), is the path as sent; the fingerprint's is normalised.
    const instance = request.url.split('?')[0]!;

    // A claim fails only because another record holds the key; a few rounds settle races with a
    // release or the expiry job between our claim and our read.
    for (let round = 0; round < 3; round++) {
      const claimToken = randomUUID();
      const now = this.clock();
      const claimed = await this.guard(() =>
        this.store.claim({ scope, key, fingerprint, method, path: instance, claimToken, now, expiresAt: new Date(now.getTime() + this.opts.retentionMs) }),
      );
      if (claimed) return this.execute(scope, key, claimToken, instance, request.traceId, run);

      const existing = await this.guard(() => this.store.find(scope, key));
      if (!existing) continue;
      const verdict = existing.verdictFor(fingerprint, this.clock(), this.opts.leaseMs);
      switch (verdict.kind) {
        case 'claimable':
          continue;
        case 'reused':
          throw new DomainError(
            'idempotency_key_reused',
            'This Idempotency-Key was already used with a different request (method, path or body). Use a new key for a different request.',
          );
        case 'in_progress':
          throw this.inProgress();
        case 'replay':
          recordIdempotencyReplay(method);
          return replayOf(verdict.response);
      }
    }
    throw this.inProgress();
  }

  private inProgress(): DomainError {
    return new DomainError('idempotency_in_progress', 'The original request with this Idempotency-Key is still in progress. Retry after it has finished.', {
      retryAfterSeconds: 1,
    });
  }

  /** Runs the handler as the holder of the claim and records how it ended. */
  private async execute(scope: string, key: string, claimToken: string, instance: string, traceId: string | undefined, run: () => Promise<RouteResult>): Promise<RouteResult> {
    let result: RouteResult;
    try {
      result = await run();
    } catch (e) {
      const status = statusOfError(e);
      if (status >= 500) await this.record(scope, key, claimToken, unknownOutcome(status, instance, traceId));
      else await this.record(scope, key, claimToken, 'released');
      throw e;
    }
    if (result.status >= 500) await this.record(scope, key, claimToken, unknownOutcome(result.status, instance, traceId));
    else if (result.status >= 400) await this.record(scope, key, claimToken, 'released');
    else await this.record(scope, key, claimToken, storedOf(result));
    return result;
  }

  /**
   * Writes the outcome. A failure here is logged, not raised: the caller already has its answer,
   * and the claim left in flight turns into "outcome unknown" once its lease runs out.
   */
  private async record(scope: string, key: string, claimToken: string, outcome: StoredResponse | 'released'): Promise<void> {
    try {
      const now = this.clock();
      const held =
        outcome === 'released' ? await this.store.release(scope, key, claimToken, now) : await this.store.complete(scope, key, claimToken, outcome, now);
      if (!held) this.logger.warn({ scope, key: keyForLog(key) }, 'idempotency claim was lost before the outcome was recorded');
    } catch (err) {
      this.logger.error({ err, scope, key: keyForLog(key) }, 'could not record the outcome of an idempotent request');
    }
  }

  /** The store unreachable before anything ran: 503, the request may be retried with the same key. */
  private async guard<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      this.logger.error({ err }, 'idempotency store unavailable');
      throw new DomainError('service_unavailable', 'The request could not be checked against its Idempotency-Key; it was not run. Retry with the same key.');
    }
  }
}

/** A key is client-chosen and may carry meaning; log only a digest of it. */
function keyForLog(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

function storedOf(result: RouteResult): StoredResponse {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(result.headers ?? {})) {
    const lower = name.toLowerCase();
    if ((REPLAYED_HEADERS as readonly string[]).includes(lower)) headers[lower] = value;
  }
  const hasBody = result.body !== undefined && result.status !== 204;
  if (hasBody) headers['content-type'] ??= 'application/json; charset=utf-8';
  return { status: result.status, headers, body: hasBody ? JSON.stringify(result.body) : null };
}

/** The stored response as a route result, marked as a replay. Content-Type follows from the status. */
function replayOf(response: StoredResponse): RouteResult {
  const { 'content-type': _type, ...headers } = response.headers;
  const body: unknown = response.body === null ? undefined : JSON.parse(response.body);
  // A replayed problem carries the replay's trace id (added when sent, the X-Trace-Id value);
  // the first attempt's, which a record stored before originalTraceId existed holds as traceId,
  // becomes originalTraceId.
  if (response.status >= 400 && body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const problem = body as Record<string, unknown>;
    if (typeof problem.traceId === 'string') problem.originalTraceId ??= problem.traceId;
    delete problem.traceId;
  }
  return { status: response.status, body, headers: { ...headers, [REPLAYED_HEADER]: 'true' } };
}
