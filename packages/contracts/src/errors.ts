/**
 * The closed set of error codes the platform speaks. Services throw `DomainError` with one of
 * these; each service's gRPC adapter carries the code in metadata, and the gateway's one table
 * turns it into problem details. Adding a code means adding it here, documented.
 */
export const ERROR_CODES = {
  /** Input failed validation; `errors` maps field paths to messages. */
  validation_failed: { title: 'One or more validation errors occurred.' },
  /** The request is malformed in a way that is not a single field (e.g. path/body id mismatch). */
  bad_request: { title: 'Bad request.' },
  /** No usable credential, or a credential of the wrong kind. */
  unauthenticated: { title: 'Unauthorized.' },
  /** Authenticated, but the credential's merchant or role does not allow this. */
  forbidden: { title: 'Forbidden.' },
  /** A suspended customer account. */
  account_suspended: { title: 'Account suspended.' },
  /** The resource does not exist or belongs to a merchant the caller cannot see. */
  not_found: { title: 'Not found.' },
  /** The merchant named in the request does not exist. */
  merchant_not_found: { title: 'Merchant not found.' },
  /** A uniqueness or state conflict. */
  conflict: { title: 'Conflict.' },
  /** A transition the aggregate's state machine refuses. */
  invalid_transition: { title: 'Invalid state transition.' },
  /** A second live subscription for the same member and plan; carries `existingSubscriptionId`. */
  subscription_exists: { title: 'A live subscription already exists for this member and plan.' },
  /** The same Idempotency-Key with a different request. */
  idempotency_key_reused: { title: 'Idempotency key reused with a different request.' },
  /** The original request with this Idempotency-Key is still running. */
  idempotency_in_progress: { title: 'Request with this idempotency key is still in progress.' },
  /** The outcome of the original request with this Idempotency-Key is unknown (it ended 5xx). */
  idempotency_outcome_unknown: { title: 'Outcome of the original request is unknown.' },
  /** The resource has expired. */
  gone: { title: 'Gone.' },
  /** Valid syntax, refused semantics (e.g. an inactive plan). */
  unprocessable: { title: 'Unprocessable entity.' },
  /** Too many failed logins; carries `retryAfterSeconds`. */
  account_locked: { title: 'Account temporarily locked.' },
  /** Rate limit tripped; carries `retryAfterSeconds`. */
  rate_limited: { title: 'Too many requests.' },
  /** The external payment provider could not be reached or failed. */
  provider_unavailable: { title: 'Payment provider unavailable.' },
  /** A message (an invitation's email or SMS) could not be delivered by its channel; what it was for was not done. */
  delivery_failed: { title: 'Message could not be delivered.' },
  /** A backing service is down. */
  service_unavailable: { title: 'Service unavailable.' },
  /** Body over the size limit (gateway only). */
  payload_too_large: { title: 'Payload too large.' },
  /** Unsupported Content-Type on a body (gateway only). */
  unsupported_media_type: { title: 'Unsupported media type.' },
  /** The request's header section is over the HTTP parser's limit (gateway only). */
  header_fields_too_large: { title: 'Request header fields too large.' },
  /** The request was not received within the gateway's time limits (gateway only). */
  request_timeout: { title: 'Request timeout.' },
  /** Anything unexpected; details are logged with the trace id, never returned. */
  internal: { title: 'An unexpected error occurred.' },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export const PROBLEM_TYPE_BASE = 'https://docs.billing-platform.dev/problems/';

/** `type` URI of a problem: the code in kebab case under the documentation base. */
export function problemType(code: ErrorCode): string {
  return PROBLEM_TYPE_BASE + code.replace(/_/g, '-');
}

export type FieldErrors = Record<string, string[]>;

/** Extension members a problem may carry beyond the RFC 9457 core. */
export interface ProblemExtensions {
  errors?: FieldErrors;
  outcome?: string;
  existingSubscriptionId?: string;
  retryAfterSeconds?: number;
  [key: string]: unknown;
}

/** The one error type domain code throws. Transport adapters translate it; nothing else should. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    detail?: string,
    readonly extensions: ProblemExtensions = {},
  ) {
    super(detail ?? ERROR_CODES[code].title);
    this.name = 'DomainError';
  }

  static validation(errors: FieldErrors, detail = 'See errors for details.'): DomainError {
    return new DomainError('validation_failed', detail, { errors });
  }

  static field(field: string, message: string): DomainError {
    return DomainError.validation({ [field]: [message] });
  }
}

export function isDomainError(e: unknown): e is DomainError {
  return e instanceof DomainError;
}
