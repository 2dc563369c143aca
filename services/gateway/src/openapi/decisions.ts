/**
 * The project's API reference for what interface.md and contract.md leave open. Served as the
 * OpenAPI document's description; every decision the implementation makes is written here.
 */
export const API_DECISIONS = `Decisions beyond interface.md and contract.md:

Authentication
- Authorization must be exactly "Bearer <credential>" (capital B, one space, no further whitespace); anything else is 401.
- Credential kinds: platform admin token, API key (sk_...), merchant-user JWT, customer JWT, checkout-session JWT. Each JWT kind has its own "aud" and header "typ"; ES256 only; a token of the wrong kind for an endpoint is 401.
- API keys act with the reach of an Admin merchant user. The platform admin token may name any existing merchant.
- Public signing keys: GET /.well-known/jwks.json.
- Revoking a key, deactivating a user or changing a user's role ends existing credentials on the next request at the gateway that served the change and within one second at every other replica.

Errors
- Every error is application/problem+json with type, title, status, detail, instance and traceId. Validation errors carry "errors" keyed by camelCase JSON path ("orders[0].id"; "$" for the body as a whole). Malformed JSON is 400, a body over 1 MiB 413, a non-JSON Content-Type 415, an unknown route 404.
- A malformed UUID in the path is 400 (validation); a well-formed unknown id is 404.
- 503 (with Retry-After) when a backing service is unreachable; never a hang: every forwarded call has a deadline.

Merchants
- providerMerchantProfileId is null until gateway credentials are configured.
- PUT /api/admin/merchants/{id}/provider: absent or null fields leave stored values unchanged.

API keys and webhooks
- PUT /api/ApiKeys/{id}/webhook: absent fields are unchanged; webhookUrl null clears it; enabling webhooks requires a URL (400 naming webhookUrl); a revoked key's webhook cannot be changed (409).
- DELETE /api/ApiKeys/{id} revokes (204), idempotently.
- GET /api/ApiKeys/{id} reads one key (never its secret).

Collections
- Paged collections take page (from 1) and pageSize (1..200, default 50).

Idempotency
- Endpoints that take Idempotency-Key check it after authentication and before anything else, the body's validation included: missing, empty (or blank) or over 255 characters is 400 with "errors" naming "Idempotency-Key". Any characters are accepted; the key is compared exactly (case-sensitive).
- Scope: the merchant of the credential (API keys and merchant users of one merchant share it); the platform admin token has its own scope.
- Fingerprint: method + path (lower-cased, without query string or trailing slash) + SHA-256 of the raw body bytes. The same JSON with different spacing or key order is a different request (409 idempotency-key-reused).
- The first request claims the key atomically (one row per scope and key in the gateway's database), so concurrent duplicates on any replica run once. While it runs, others get 409 with type .../idempotency-in-progress and Retry-After: 1.
- Replays carry Idempotent-Replayed: true and reproduce status, body and Location. Content-Type follows the status (application/json for success, application/problem+json for errors).
- A 4xx outcome (including a body that fails validation) releases the key: the same request runs again, a different one is still 409. A 5xx outcome (502, 503, a crash) is kept and replayed with its original status as problem+json with type .../idempotency-outcome-unknown and a detail saying the outcome is unknown; the traceId in it is that of the original attempt. A fresh attempt needs a new key.
- A claim whose request has not finished within IDEMPOTENCY_LEASE_SECONDS (default 60; longer than any backend call can take) is presumed lost with its gateway: retries then get 500 .../idempotency-outcome-unknown. If the original does finish later, its real outcome is recorded and replayed from then on.
- If the gateway cannot reach its idempotency store before running the request: 503 with Retry-After; nothing ran, and the same key may be retried.
- Keys are kept 24 hours from the start of the attempt that claimed them (IDEMPOTENCY_RETENTION_HOURS); after that the key is free for any request. Expired records are deleted every 10 minutes (IDEMPOTENCY_CLEANUP_INTERVAL_MS).
`;
