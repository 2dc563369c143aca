import { DomainError, ERROR_CODES, problemType, type ErrorCode } from '@billing/contracts';
import { currentTraceId } from '@billing/telemetry';

/**
 * The gateway's one table from error code to HTTP status. Services never speak HTTP; they
 * throw coded DomainErrors, which arrive here through gRPC metadata.
 */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  validation_failed: 400,
  bad_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  account_suspended: 403,
  not_found: 404,
  merchant_not_found: 404,
  conflict: 409,
  invalid_transition: 409,
  subscription_exists: 409,
  idempotency_key_reused: 409,
  idempotency_in_progress: 409,
  idempotency_outcome_unknown: 500,
  gone: 410,
  unprocessable: 422,
  account_locked: 429,
  rate_limited: 429,
  provider_unavailable: 502,
  delivery_failed: 502,
  service_unavailable: 503,
  payload_too_large: 413,
  unsupported_media_type: 415,
  header_fields_too_large: 431,
  request_timeout: 408,
  internal: 500,
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  traceId?: string;
  [extension: string]: unknown;
}

/** RFC 9457 body for a DomainError; `retryAfterSeconds` is left for the Retry-After header. */
export function problemOf(e: DomainError, instance?: string, status = HTTP_STATUS[e.code]): Problem {
  const { retryAfterSeconds: _retry, status: _s, ...extensions } = e.extensions as Record<string, unknown>;
  return {
    type: problemType(e.code),
    title: ERROR_CODES[e.code].title,
    status,
    detail: e.message,
    instance,
    traceId: currentTraceId(),
    ...extensions,
  };
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';
