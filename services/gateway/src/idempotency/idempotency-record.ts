import { EntitySchema } from '@mikro-orm/postgresql';
import { ERROR_CODES, problemType } from '@billing/contracts';

/**
 * `in_flight`: claimed by a running request. `completed`: ended 2xx or 5xx; its response is
 * replayed. `released`: ended 4xx; the same request may claim the key again (rule 6), a
 * different one is still refused (contract §10).
 */
export type IdempotencyState = 'in_flight' | 'completed' | 'released';

/** A response as stored and replayed: status, the headers that matter, the serialised JSON body. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  /** The body exactly as first sent (JSON text), or null for no body. */
  body: string | null;
}

/** What a request gets from a key another request already holds. */
export type Verdict =
  | { kind: 'claimable' }
  | { kind: 'reused' }
  | { kind: 'in_progress' }
  | { kind: 'replay'; response: StoredResponse };

/** Headers of a first response that are stored and replayed. */
export const REPLAYED_HEADERS = ['location', 'content-type'] as const;

/**
 * One Idempotency-Key of one merchant: the request that claimed it (its fingerprint) and, once
 * it ended, its outcome. Times are the gateway's clock.
 */
export class IdempotencyRecord {
  /** The credential's merchant id; `admin` for the platform admin. */
  scope!: string;
  key!: string;
  /** SHA-256 (hex) of method, normalised path and SHA-256 of the raw body. */
  fingerprint!: string;
  method!: string;
  /** The path as the claiming request sent it (without the query): the instance of its "outcome unknown" problem. */
  path!: string;
  state!: IdempotencyState;
  /** Identifies the attempt that holds the claim; only it may record the outcome. */
  claimToken!: string;
  claimedAt!: Date;
  responseStatus: number | null = null;
  responseHeaders: Record<string, string> | null = null;
  responseBody: string | null = null;
  createdAt!: Date;
  completedAt: Date | null = null;
  /** After this the key is free for reuse; the expiry job deletes the row. */
  expiresAt!: Date;

  /**
   * The answer to a request with this record's key. `leaseMs` bounds how long a claim may stay
   * in flight: past it the claimer is presumed dead (a crashed gateway) and its outcome unknown.
   */
  verdictFor(fingerprint: string, now: Date, leaseMs: number): Verdict {
    if (this.expiresAt.getTime() <= now.getTime()) return { kind: 'claimable' };
    if (this.fingerprint !== fingerprint) return { kind: 'reused' };
    switch (this.state) {
      case 'released':
        return { kind: 'claimable' };
      case 'in_flight':
        if (now.getTime() - this.claimedAt.getTime() < leaseMs) return { kind: 'in_progress' };
        return { kind: 'replay', response: unknownOutcome(500, this.path, undefined, 'did not finish within the lease (the gateway handling it presumably stopped)') };
      case 'completed':
        return { kind: 'replay', response: { status: this.responseStatus ?? 500, headers: this.responseHeaders ?? {}, body: this.responseBody } };
    }
  }
}

/**
 * What is stored for a 5xx outcome (rule 7): the original status with a problem saying the
 * outcome is unknown, since the backend may or may not have applied the change.
 */
export function unknownOutcome(status: number, instance: string, traceId?: string, ended = `ended with status ${status}`): StoredResponse {
  const body = {
    type: problemType('idempotency_outcome_unknown'),
    title: ERROR_CODES.idempotency_outcome_unknown.title,
    status,
    detail:
      `The original request with this Idempotency-Key ${ended}, so its outcome is unknown. ` +
      'It is not run again: check the state of the resource, and use a new Idempotency-Key for a fresh attempt.',
    instance,
    // The replay's own trace id is added when it is sent (traceId, as in X-Trace-Id); this one
    // names the attempt whose outcome is unknown.
    ...(traceId ? { originalTraceId: traceId } : {}),
  };
  return { status, headers: { 'content-type': 'application/problem+json; charset=utf-8' }, body: JSON.stringify(body) };
}

export const IdempotencyRecordSchema = new EntitySchema<IdempotencyRecord>({
  class: IdempotencyRecord,
  tableName: 'idempotency_records',
  properties: {
    scope: { type: 'string', primary: true },
    key: { type: 'string', primary: true },
    fingerprint: { type: 'string' },
    method: { type: 'string' },
    path: { type: 'string' },
    state: { type: 'string' },
    claimToken: { type: 'uuid' },
    claimedAt: { type: 'Date', columnType: 'timestamptz' },
    responseStatus: { type: 'smallint', nullable: true },
    responseHeaders: { type: 'json', nullable: true },
    responseBody: { type: 'text', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    completedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
