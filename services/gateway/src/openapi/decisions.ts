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
`;
