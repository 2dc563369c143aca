/**
 * The rules the implementation decides, each attached to what it governs in the OpenAPI
 * document: a section's bullets become the description of its tag (Members, Plans, …), of the
 * bearer security scheme (Authentication), of ProblemDetails (Errors), of the Idempotency-Key
 * parameter (Idempotency), of every 429 response (Rate limits) and of the webhook events.
 * Nothing here points outside the document.
 */
const SECTIONS_TEXT = `Authentication
- Authorization must be exactly "Bearer <credential>" (capital B, one space, no further whitespace); anything else is 401.
- Every 401 carries WWW-Authenticate: Bearer realm="api", with error="invalid_token" when an Authorization header was sent (RFC 6750).
- Credential kinds: platform admin token, API key (sk_...), merchant-user JWT, customer JWT, checkout-session JWT. Each JWT kind has its own "aud" and header "typ"; ES256 only; a token of the wrong kind for an endpoint is 401.
- API keys act with the reach of an Admin merchant user. The platform admin token may name any existing merchant.
- Public signing keys: GET /.well-known/jwks.json.
- Revoking a key, deactivating a user or changing a user's role ends existing credentials on the next request at the gateway that served the change and within one second at every other replica. No revocation is skipped, whatever order the changes commit in.
- Until a gateway replica has read identity's credential-change feed once (at start-up), it answers requests carrying an API key or a JWT with 503 and Retry-After: 1 (it cannot yet know which were revoked); the platform admin token is served.
- Reactivating a user does not revive tokens issued before the deactivation; the user signs in again.
- The platform admin token has no merchant: GET /api/Merchants/me with it is 401.
- Endpoints that hash a password (sign-in, sign-up, password reset, creating a merchant user) are forwarded with a 15 s deadline; every other call with GRPC_DEADLINE_MS (5 s).

Security headers
- Every response has X-Content-Type-Options: nosniff; every /api response has Cache-Control: no-store (they carry tokens, plaintext API keys and signing secrets); /docs has a Content-Security-Policy (default-src 'none'; its own inline script and style; connect-src 'self'; frame-ancestors 'none').
- JWTs of every kind must carry exp, iat and sub (else 401); a verified token is remembered at most until its exp.

Errors
- Every error is application/problem+json with type, title, status, detail, instance and traceId. Validation errors carry "errors" keyed by camelCase JSON path ("orders[0].id"; "$" for the body as a whole). Malformed JSON is 400, a body over 1 MiB 413, a non-JSON Content-Type 415, an unknown route 404.
- A malformed UUID in the path is 400 (validation); a well-formed unknown id is 404.
- 503 (with Retry-After) when a backing service is unreachable; never a hang: every forwarded call has a deadline.
- 503 (with Retry-After: 1) when a service's database cannot serve the request now: every connection slot taken (SQLSTATE 53300, or another insufficient-resources error), the server shutting down or starting up, the connection refused or lost, or no pooled connection within the pool's wait. As any 5xx, it is kept as the outcome of its Idempotency-Key.
- Errors raised before any route, by the HTTP parser, are problem details too: a header section over the limit (16 KiB) is 431 with type .../header-fields-too-large; bytes no header may hold, a header name with a space or a malformed request line is 400 .../bad-request; a request not received in time 408. The connection is closed after them.
- An unknown method on a known path (PUT /api/Products) is 404, like an unknown path.

Trace ids
- Every response, success or error, carries the request's trace id (W3C, 32 lower-case hex) in the header X-Trace-Id; a problem's traceId is the same value. It is set before anything else runs (even for the errors above). A valid W3C traceparent request header supplies the trace id; otherwise a fresh one is minted. Backing services' logs and spans carry the same id.

Text (contract section 2)
- Text is stored and returned exactly as sent: no trimming, no case folding, no Unicode normalisation (a decomposed "e" + U+0301 stays decomposed). Lookups keep their own rules (member and account emails match case-insensitively).
- A required text field (names, question text, option labels, fullName, firstName, lastName) must contain at least one non-whitespace character, else 400 naming it; whitespace-only optional text is stored as sent, an empty optional string counts as absent where the field says so (customer profile).
- A request body that is not valid UTF-8 is 400 with "errors" naming the field that holds the bad bytes ("$" when it cannot be told). Invalid bytes are never replaced with U+FFFD.
- A NUL (U+0000) or an unpaired UTF-16 surrogate (e.g. "\\ud800") in any body string at any depth, in a property name, in a query value or a path segment is 400 with "errors" naming every such field by its camelCase JSON path ("customer.email", "items[0].name") or query parameter name; percent-encoded bytes in the query that are not UTF-8 ("%FF") likewise.
- A request path whose percent-encoded bytes are not UTF-8 ("/api/Transactions/%FF") is 400; a path segment over 500 characters names no resource (ids are far shorter), so it is 404. Both are problem details with a trace id, raised before authentication.
- These checks run before authentication and before the Idempotency-Key is looked at (like malformed JSON), so a refused request never claims or consumes a key. As a backstop, text the database refuses is 400 bad-request, never 500.
- Dates and date-times (startDate, resumeAt, asOf, periodStart, periodEnd, expiresAt) must fall in the years 0001 to 9999 UTC, else 400 naming the field; year 0000 exists in no calendar storage holds. A subscription whose first period (or trial) would end after 9999 is 400 naming startDate.
- Codes are normalised, not stored as sent: currency is upper-cased, a BSB is stored as 123-456.

Merchants
- providerMerchantProfileId is null until gateway credentials are configured.
- PUT /api/admin/merchants/{id}/provider: absent or null fields leave stored values unchanged.
- Merchant users (POST and GET /api/admin/merchants/{id}/users, the latter listing them oldest first in the paged shape; GET and PATCH /api/admin/merchants/{id}/users/{userId}): the platform admin, or a merchant user with the Owner role for its own merchant (contract §1: "Owner: Admin plus merchant users"); any lower role is 403, and so is naming another merchant; an API key is 401 (an integration credential, of the wrong kind here). An Owner may create users of any role, Owner included, and change or deactivate any user of its merchant.
- GET /api/admin/merchants/{id}/users/{userId} reads one merchant user, where the Location of POST /api/admin/merchants/{id}/users points; a user of another merchant, or an unknown one, is 404.

API keys and webhooks
- PUT /api/ApiKeys/{id}/webhook: absent fields are unchanged; webhookUrl null clears it; enabling webhooks requires a URL (400 naming webhookUrl); a revoked key's webhook cannot be changed (409).
- DELETE /api/ApiKeys/{id} revokes (204), idempotently.
- GET /api/ApiKeys/{id} reads one key (never its secret).

Collections
- Paged collections take page (1 to 2147483647, the int32 range of interface.md) and pageSize (1..200, default 50); outside those ranges is 400 naming the parameter, never a wrapped or clamped page. A page past the last is an empty page of the collection (hasNextPage false).

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

Money
- Amounts cross the REST boundary as decimals in major units (19.95) with an ISO 4217 currency (default AUD); they are stored and computed as integer minor units. A JSON number is read through its shortest decimal form (what the client wrote); a decimal string ("19.95") is accepted too. More fraction digits than the currency has (19.951 AUD, "19.950", 1.5 JPY) are 400 naming "amount", never rounded. Amounts the platform computes (fees, proportions) are rounded half-even to the minor unit.
- Supported currencies: AUD, NZD, USD, CAD, EUR, GBP, CHF, SGD, HKD, SEK, NOK, DKK, ZAR, INR, MYR, PHP, THB, IDR, CNY, MXN, BRL, FJD, PGK (2 decimals), JPY, KRW, VND, XPF (0), KWD, BHD, OMR, JOD (3); lower case is accepted and upper-cased. Largest amount: 999,999,999,999.99 (in minor units: 99,999,999,999,999).

Catalogue (products, questions, plans)
- Writes need the Admin role (or an API key); reads Viewer. Collections are ordered oldest first.
- Product: { id, merchantId, name (1..200), description (nullable, up to 2000), createdAt, updatedAt }.
- Question: { id, productId, text (1..1000), kind, required (default false), order, options: [{ id, label }], createdAt }. Text questions have no options; SingleChoice and MultiChoice need 1..50 options with unique labels (case-insensitive). "order" may be given (int32) or defaults to the product's highest order + 1 (the first question is 1); equal orders are allowed and listed by id. GET /api/Products/{productId}/questions/{id} reads one question (the Location of a created one).
- Questions of a product of another merchant, or of an unknown product: 404. A body productId (or id) differing from the path: 400.
- Question reorder: all or nothing; an id listed twice is 400 naming orders[i].id like an id that is not a question of the product; 204 on success.
- Plan: { id, merchantId, productId, name, amount, currency, interval, intervalCount, trialDays, isActive, createdAt, updatedAt }. amount must be positive; intervalCount 1..52 (default 1); trialDays 0..365 (default 0); isActive default true. The product must be the merchant's (404 otherwise). PATCH changes only name and isActive (absent or null: unchanged); price and schedule are fixed. GET /api/Plans also filters by productId and isActive=true|false.
- Billing periods: Week = 7 days, Fortnight = 14 days, Month and Year are calendar months in UTC keeping the day of month of the first billed period (clamped to the month's last day: a subscription billed on the 31st is billed on Feb 28/29, Mar 31, Apr 30, ...).

Members
- POST /api/Members needs the Staff role. Member: { id, merchantId, email, firstName (1..100), lastName (1..100), phone (nullable, up to 50), createdAt, updatedAt }. The email is stored as first given and matched case-insensitively.
- A create for an email that exists answers 200 with the existing member unchanged (the names and phone of the request are ignored) and emits nothing; concurrent creates for one email yield one member (unique index on merchant and lower(email)), one 201 and 200 for the rest.
- GET /api/Members?email= matches the whole email, case-insensitively.

Payment methods
- Writes need the Staff role. A payment method: { id, merchantId, memberId, type, brand, last4, expiryMonth, expiryYear, accountName, bsb, rank, isDefault, createdAt }; rank starts at 1 (the default) and a new method is appended at the lowest rank. Concurrent adds to one member (from any replica) get distinct, consecutive ranks: each is decided on what was committed and written only if no other add took its rank meanwhile (else decided again; after five such losses, under the member's row lock). A reorder racing an add lists the methods it saw; the add still takes the rank after the last.
- Card needs expiryMonth and expiryYear (not before the current month, UTC) and takes no accountName/bsb; BankAccount needs accountName and bsb (6 digits, stored as 123-456) and takes no expiry. Body fields cardNumber, number, pan, accountNumber, cvc, cvv, cvn, securityCode (and snake_case forms) are refused with 400 naming the field; other unknown fields are ignored.
- from-token: the token is looked up at the merchant's payment provider (Staging: the sandbox provider); the provider's details are stored with the token. The same token again for the same member answers 200 with the existing method; a token attached to another member, unknown to the provider or created for another merchant: 400 naming providerToken. Provider unreachable, failing (5xx) or not answering within 3 s (PAYMENT_PROVIDER_TIMEOUT_MS): 502 provider-unavailable; with Idempotency-Key rule 7 a retry needs a new key.
- GET /api/members/{memberId}/payment-methods/{id} reads one method (the Location of a created one).
- Reorder: orderedIds null counts as an empty list (valid only for a member without methods). Answers 200 with the member's methods in their new order. Reorder does not take an Idempotency-Key (it is naturally idempotent) and emits no event.

Subscriptions
- Writes need the Staff role. A subscription: { id, merchantId, memberId, planId, paymentMethodId, status, currentPeriodStart, currentPeriodEnd, nextBillingAt, cancelAtPeriodEnd, pausedAt, resumeAt, cancelledAt, createdAt, updatedAt }.
- startDate may be a date-time or a date (00:00 UTC), past or future; default now. Without a trial the first period is [start, start + interval) and is due at start (nextBillingAt = currentPeriodStart). With trialDays the trial is a free first period [start, start + trialDays) and the first charge is due at its end.
- paymentMethodId is optional; when set it must be a method of the member (another merchant's or unknown: 404; another member's: 400). Without it the member's methods are charged in rank order.
- Checks in order: member (404), plan (404), payment method (404/400), plan active (422 unprocessable), no live subscription for the member and plan (409 subscription-exists with existingSubscriptionId; also enforced by a partial unique index, so concurrent creates yield exactly one).
- Transitions: pause (Active or PastDue → Paused; resumeAt optional and in the future, else 400), resume (Paused → Active, or PastDue when it owes a period, below), cancel (any live → Cancelled). Pausing a Paused one, resuming one that is not Paused, and anything on a Cancelled one are 409 invalid-transition.
- Resume: if the pause covered nextBillingAt, a new period starts at the resume and is due at once (billing in advance); otherwise the paid period continues unchanged. resumeAt is recorded for the billing run to resume automatically: the first run at or after it resumes the subscription as of resumeAt (subscription.resumed), with the rule above, and charges it if a new period is then due. A pause does not forgive an unpaid period: a Paused subscription that owes one (paused while PastDue, or whose bank debit failed at settlement while it was paused, see Billing engine) resumes PastDue (subscription.resumed, then subscription.past_due), its next retry at its date from the first failure (nextBillingAt; at the resume when that has passed); if the pause covered the end of the owed period, a new period starts at the resume as above and is due once the owed one is collected.
- cancel { atPeriodEnd: true } on an Active subscription sets cancelAtPeriodEnd and changes nothing else (no event); the billing run cancels it when the period ends instead of charging, and subscription.cancelled is emitted then. A subscription that has not paid its current period yet (a new one whose first charge is due, or one resumed into a new period) is still charged for that period, and ends at its end. On a Paused or PastDue subscription there is no running paid period, so atPeriodEnd cancels at once. Cancelling sets cancelledAt and clears nextBillingAt.
- GET /api/Subscriptions filters by memberId, planId and status.

Events (billing)
- member.created, payment_method.added, subscription.created, subscription.paused, subscription.resumed and subscription.cancelled carry in "data" the resource exactly as the REST API shows it after the change. They are written to the outbox in the same transaction as the change.

Payment provider (sandbox)
- The sandbox provider is its own process (SANDBOX_PROVIDER_PORT, default 8090) with an HTTP API: POST /v1/card-tokens { number, expiryMonth, expiryYear, brand? } and POST /v1/bank-tokens { accountName, bsb, accountNumber } → 201 { token (ctok_/btok_), type, brand, last4, expiryMonth, expiryYear, accountName, bsb } (full numbers are not kept); GET /v1/tokens/{token}; POST /v1/charges (Idempotency-Key required; { amountMinor, currency, paymentMethod: { token } or { type, last4 } }) → 201 { id, status Settled|Processing|Failed, failureReason, ... }; GET /v1/charges/{id}; POST /v1/charges/{id}/settle (ends a bank charge's settlement window); POST /v1/refunds (Idempotency-Key; { chargeId, amountMinor }).
- Calls name the merchant account in the header "sandbox-account" (the merchant id); a token created for an account is visible to that account only (one created without the header to any).
- Test values: Card last4 0002 declines (card_declined); other cards settle at once; bank charges stay Processing until settled, then fail with insufficient_funds when last4 ends in 002, else settle.
- Fault switch (not in production mode): POST /__sandbox/faults { down?, dropConnections?, latencyMs?, account? } (account limits the fault to one merchant), GET and DELETE /__sandbox/faults[?account=]. Env SANDBOX_FAULT_DOWN and SANDBOX_LATENCY_MS set faults at start. State is in memory: a sandbox restart forgets tokens and charges.

Customer accounts
- Customer tokens are ES256 JWTs (aud billing:customer, typ customer+jwt, claims sub = account id, iat, iat_ms, exp) valid one hour. They are accepted only on customer endpoints (/api/account/me, /api/account/profile, later /api/onboard/*), and those endpoints accept no other credential (401).
- Emails are case-insensitive and stored lower-cased; the account email is returned lower-cased.
- Passwords: 8 to 128 characters, scrypt (N=2^17, r=8, p=1). firstName and lastName: up to 100 characters with at least one non-whitespace character, stored as sent. dateOfBirth: YYYY-MM-DD, a real calendar date, on or after 1900-01-01 and before today (UTC). phone up to 50 characters, addressLine1/2 up to 200, city, state, country up to 100, postCode up to 20; an empty string counts as not given. Every failing field is named in "errors".
- signup: a new email creates the account (200); the email of an unclaimed account (created by an invitation or checkout, no password) claims it: the password and names are set, dateOfBirth set, and contact fields given replace stored ones (absent ones are kept) (200). A claimed account: 409. acceptedTerms true records the time of acceptance; false or absent is not refused. A verification link is emailed at signup; emailVerified stays false until POST /api/account/verify-email { token } (204; a used, expired (24 hours) or unknown token: 400 naming token).
- login: a wrong password, an unknown email and an unclaimed account (no password) are the same 401. A suspended account: 403 (type .../account-suspended) only with the right password; with a wrong one it is the usual 401.
- PUT /api/account/profile: firstName and lastName are required and replace the stored ones; optional fields that are absent are unchanged, null (or "") clears them; dateOfBirth, when given, must be valid and cannot be cleared. A body accountId other than the token's account is 403 (the caller is authenticated but may only change their own profile); the same id, or none, is accepted.
- GET /api/account/me and PUT profile with the token of a suspended (or no longer existing) account: 401.
- forgot-password { email }: 202 with no body for every well-formed email (400 only for a malformed one). The answer is given before the account is looked up (the reset email is written in the background), so neither the answer nor its timing depends on whether the account exists.
- Reset tokens (forgot-password link and POST /api/admin/accounts/{id}/password-reset): 32 random bytes, base64url (43 characters), stored as SHA-256, valid one hour, single use (an atomic conditional update: of two concurrent uses exactly one answers 204, the other 400). A used, expired or unknown token: 400 naming token; a newPassword outside 8..128: 400 naming newPassword. A successful reset ends every token issued to the account before it (401 on their next request), retires the account's other reset tokens, clears the email's failed-login lock, and claims an unclaimed account.
- Links in emails: <PUBLIC_BASE_URL>/reset-password?token=... and <PUBLIC_BASE_URL>/verify-email?token=... . The default email channel writes each message as a JSON file { id, channel, sentAt, to, subject, text } in <DATA_DIR>/mail/; an SMS channel exists only when SMS_PROVIDER is set (file: <DATA_DIR>/sms/).
- The support-desk reset (admin) answers 200 { token, expiresAt } and emails nothing; unknown account 404.
- suspend / unsuspend (admin): 204, idempotent, 404 for an unknown account. Suspension ends the account's tokens on the next request at the serving gateway and within one feed poll at the others; unsuspending lets the customer sign in again, while tokens issued before the suspension stay invalid.
- Lockout: 5 consecutive failed logins for one email (known or not, so the lock does not reveal registration) from one client (its IP address as the gateway sees it) lock that email for that client for 15 minutes (CUSTOMER_LOCKOUT_THRESHOLD, CUSTOMER_LOCKOUT_SECONDS). The fifth failure itself answers 401; from then on until the window ends every login for the email from that client answers 429 (type .../account-locked) with Retry-After = whole seconds left, even with the right password. When the window ends the count starts again from zero; each further lock of the same email and client lasts twice as long as the one before (30 min, 1 h, ... up to 24 h); a successful login from the client resets both. Failures are counted with one atomic statement per attempt, so concurrent attempts at any number of replicas all count.
- Why per client: a stranger who fails on someone's email locks only themselves; the owner signing in from their own client is not kept out. Guessing one email from many clients is bounded by the per-account limit of the password endpoints (see Rate limits). A password reset clears the email's locks on every client.
- Merchant-user login (POST /api/auth/login) locks the same way (MERCHANT_USER_LOCKOUT_THRESHOLD, MERCHANT_USER_LOCKOUT_SECONDS): an unknown email, a wrong password and an inactive user all count as failures and answer the same 401; while locked, 429 .../account-locked with Retry-After even with the right password.
- forgot-password sends at most FORGOT_PASSWORD_PER_EMAIL_PER_HOUR (default 3) reset emails per email address in an hour (a fixed window from the first one); further requests still answer 202 and send nothing.
- Password hashing (login, signup, reset-password, creating a merchant user) runs at most PASSWORD_HASH_MAX_CONCURRENT (default 4) at once per identity process; beyond that the request answers 503 (type .../service-unavailable) with Retry-After: 1 at once instead of queueing.

Rate limits
- Limits apply in this order, each a token bucket shared across replicas, each off when its variable is 0:
  1. Every /api request per client IP, before authentication: RATE_LIMIT_IP_BURST (600) refilled at RATE_LIMIT_IP_PER_SECOND (300/s).
  2. On the password endpoints (POST /api/account/login, /api/account/signup, /api/account/reset-password, /api/auth/login): per client IP, PASSWORD_LIMIT_IP_PER_MINUTE (20) a minute; and per account (the email, lower-cased, across all four endpoints; the token for reset-password), PASSWORD_LIMIT_ACCOUNT_PER_MINUTE (10) a minute from any client. Every attempt counts.
  3. Failed authentications per client IP: AUTH_FAILURE_LIMIT_PER_MINUTE (30) a minute. Only refused credentials count (unknown, revoked or expired API keys, invalid JWTs, a wrong admin token); once spent, every request from that IP carrying a bearer credential is 429 before the credential is checked, so guessing keys or forging tokens costs identity nothing.
  4. Per credential, after authentication (below).
- Headers (draft-ietf-httpapi-ratelimit-headers, current form): every response counted against a limit carries RateLimit-Policy, one item per limit it was counted against, e.g. "ip";q=600;w=2, "credential";q=200;w=2 (q: bucket size in requests, w: seconds the bucket takes to refill from empty), and RateLimit with the state after this request, e.g. "ip";r=599;t=1, "credential";r=199;t=1 (r: whole requests left now, t: seconds until the bucket is full again). Policy names: ip, password-ip, password-account, auth-failures, credential. A 429 names in its detail the limit that was exceeded; its RateLimit item for that limit has r=0, and Retry-After gives the whole seconds (at least 1) until a request would be admitted.
- Every endpoint served through the API is limited per credential (the API key, merchant user, customer, checkout session or platform admin token) and, for anonymous endpoints (including POST /api/auth/login and the /api/account endpoints), per client IP: a token bucket of RATE_LIMIT_BURST requests (default 200) refilled at RATE_LIMIT_PER_SECOND (default 100). Requests whose credential is refused (401) are not counted. /health, /openapi.json and /docs are not limited.
- Over the limit: 429 problem details (type .../rate-limited) with Retry-After in whole seconds (at least 1) until a request would be admitted.
- The limit holds across gateway replicas: each replica decides locally (no network round trip per request) and reconciles each active bucket with a shared one in a NATS JetStream key-value bucket every RATE_LIMIT_SYNC_MS (default 100 ms), at once for a credential it has not seen recently, and whenever it has admitted a tenth of a burst since its last reconciliation (optimistic compare-and-set on the KV revision). Replicas can together overshoot by what they admit while a reconciliation is in flight (for a credential none has seen, up to one burst each); the overshoot is kept as debt (down to minus one burst) and repaid before further requests are admitted.
- When NATS is unreachable each replica keeps limiting on its own (logged) and resumes sharing when it is back; the limiter never fails a request.
- Limits counted on rare events (failed authentications, password endpoints) are re-read from the shared store at every reconciliation for 10 s after a replica last counted in them, so a replica refuses within one RATE_LIMIT_SYNC_MS of the others' counting.
- The client IP is the address Fastify reports. The gateway trusts X-Forwarded-For (trustProxy), so it must only be reachable through proxies that overwrite that header; otherwise a client can pick its own IP and so its own anonymous bucket.

Webhooks
- Body of every POST: { id, type, timestamp, merchantId, data } (Content-Type application/json). id is the event id; timestamp is when the event occurred (ISO 8601 UTC); data is the resource as the REST API shows it after the change. The same bytes are sent on every attempt.
- Signature (Standard Webhooks): webhook-id = the event id (the same on every attempt and replay; receivers de-duplicate on it); webhook-timestamp = unix seconds of the attempt; webhook-signature = "v1," + base64 HMAC-SHA256 of "{id}.{timestamp}.{body}" keyed with the base64-decoded part of the key's signing secret after "whsec_". Any Standard Webhooks library verifies it.
- Delivered types: only the webhook event types (checkout.completed, member.created, payment_method.added, subscription.*, transaction.*, onboarding.completed, fee_statement.*). Internal events (api_key.created, api_key.webhook_configured, api_key.revoked) are never sent.
- Who receives an event: every API key of the event's merchant whose webhook is enabled, not revoked, has a URL, and is subscribed (webhookEvents null = every type, [] = none). The settings in force are those the webhooks service has received when it takes the event off the bus (normally within milliseconds of the change; settings changed after an event was raised do not re-route it), with one catch-up: each service publishes from its own outbox, so an event can reach the webhooks service before the webhook change made just before it (enable a webhook, then at once create a member). When a change makes an endpoint live, every event of its merchant the webhooks service already holds that occurred at or after the change, and that the endpoint subscribes to, is delivered to it then (once per event and key).
- One delivery per (event, API key). Delivery status: Pending, Succeeded, Failed. Each attempt goes to the key's webhook URL at the time of the attempt (url shows the latest one), so fixing a URL also fixes pending retries. While a key's webhook is disabled its pending deliveries wait (they resume, if due, when it is enabled again); revoking a key fails its pending deliveries.
- Success: a 2xx response (body included) within 15 s. Redirects are not followed (a 3xx is a failed attempt, error "http_status"). Anything else, including timeouts and connection errors, is a failed attempt.
- Retries after a failed scheduled attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (WEBHOOK_RETRY_SCHEDULE), each spread by ±10% (WEBHOOK_RETRY_JITTER); 8 scheduled attempts in all, then Failed. On a 429 or 503 the next attempt waits at least the Retry-After the receiver sent (seconds or HTTP date; capped at 24 h).
- Attempts record attemptedAt, trigger (Scheduled or Manual), statusCode (null when no response arrived), durationMs, error (null on success; otherwise one category: timeout, connection_refused, tls_error, dns_error, address_refused, http_status, never error text) and the first 1 KiB of the response body (responseBody). attemptCount is the number of attempts of both triggers. nextAttemptAt is set while Pending (a time in the past while an attempt is in flight) and null otherwise.
- GET /api/WebhookDeliveries: Viewer; merchantId optional for merchant credentials (their own merchant), naming another merchant is 403; filters status (Pending|Succeeded|Failed, else 400) and eventType; newest first; each item includes its attempts. GET /api/WebhookDeliveries/{id}: Viewer; another merchant's delivery is 404.
- POST /api/WebhookDeliveries/{id}/replay: Staff; no body; does not take Idempotency-Key; every call queues a new Manual attempt and answers 202 { attemptId } at once; the attempt (with that id) appears in the delivery when made, normally within a second. It uses the same webhook-id with a fresh timestamp and signature, goes to the key's current URL (also while its webhook is disabled: a replay is an explicit request), does not move the retry schedule, and a successful one makes a Pending or Failed delivery Succeeded. A delivery whose API key has been revoked is 409.
- Delivery is at least once: a crash at any point (before publishing, mid-delivery, before an attempt is recorded) leads to the event being sent again, never to it being lost. Events of one merchant are sent in the order they were committed as far as possible, but ordering is not guaranteed (retries, replicas); use data and timestamp to order.
- A slow or failing endpoint never delays others: at most 32 requests in flight per API key (WEBHOOK_ENDPOINT_CONCURRENCY) and 256 in all (WEBHOOK_CONCURRENCY) per webhooks replica.
- In production mode only global unicast addresses are delivered to: loopback, private, link-local, CGNAT, multicast, reserved, documentation and unique-local ranges are refused, also when wrapped in an IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) or 6to4 (2002::/16) IPv6 address. The same policy refuses the URL when it is configured and at delivery time, where it applies to every address a connection actually uses (no DNS-rebinding window): the attempt fails with error "address_refused", nothing is sent, and it is retried on the schedule.
- The signing secret is read by the webhooks service from identity over gRPC (an internal-only service, not reachable through the gateway) and kept in memory; it never travels on the event bus and is never logged.
- Finished deliveries (and their attempts) are kept 30 days (WEBHOOK_RETENTION_DAYS), then deleted.

Invitations and self-serve onboarding
- POST /api/Invitations needs Admin (or an API key); GET /api/Invitations and GET /api/Invitations/{id} need Viewer; DELETE /api/Invitations/{id} needs Admin. Another merchant's invitation by id is 404; naming another merchant is 403.
- Names: 1..100 characters with at least one non-whitespace character, stored exactly as sent. email: a valid email, at most 256; phone: at most 50, digits with an optional leading + (spaces, hyphens and parentheses allowed). Neither email nor phone: 400 naming both. expiresInDays 1..90, default 7 (INVITATION_DEFAULT_EXPIRY_DAYS).
- Checks in order: the body (400), the credential's merchant (403; MerchantNotFound 404 with "outcome"), the delivery channel (NoDeliveryChannel 422 with "outcome" when only a phone is given and SMS_PROVIDER is none). Then an unclaimed customer account is created for an email without an account, the invitation is stored, and the link <PUBLIC_BASE_URL>/onboard?token=<token> is emailed (email given) and sent by SMS (phone given and an SMS channel configured). The email names the merchant as it was at most CHECKOUT_MERCHANT_CACHE_MS (default 5 seconds) earlier: a renamed merchant's new name appears in invitation emails within that time.
- The token: 32 random bytes, base64url (43 characters), returned once in the invitation result and in the link; only its SHA-256 is stored; GET never shows it.
- Invitation: { id, merchantId, firstName, lastName, email, phone, status, expiresAt, createdAt, acceptedAt, completedAt, revokedAt, memberId, subscriptionId }. status: Pending (sent), Accepted (bound to a customer account), Completed, Revoked, Expired (past expiresAt and not completed). GET /api/Invitations is newest first, filter status.
- DELETE revokes (204, idempotent); the link then answers 410, and so do the wizard's writes and completion. A completed invitation cannot be revoked (409).
- POST /api/onboard/preview { token } (anonymous; the link's token is the credential): { invitationId, merchantName, firstName, lastName, email, phone, expiresAt, status, accountState: None | Unclaimed | Claimed } so the page offers sign-up or sign-in. Unknown 404; revoked or expired 410 (with "reason": Revoked | Expired).
- POST /api/onboard/accept binds the invitation to the customer for good; the same customer again answers 200 with the same body; another account 409. Plans listed are the merchant's active plans, amounts in major units.
- /api/onboard/* take only a customer token (401 otherwise); an invitation not accepted by the calling customer is 404 on every one of them.
- Wizard writes answer 204 and may be repeated; details replace the saved details; the payment method is a tokenisation result (full numbers refused as on /api/members/{id}/payment-methods); plan: unknown or inactive 400 naming planId, a plan of another product drops the saved answers; answers replace the draft (null or [] saves an empty set; each question at most once). After completion writes are 409.
- GET /api/onboard/{invitationId}: the saved state with "step" (Details | PaymentMethod | Plan | Questions | Review | Done), derived from what has been saved; a reload resumes there.
- POST /api/onboard/complete: validation errors are keyed details, paymentMethod, planId and answers.<questionId>. The member's email is the invitation's email (else the customer account's); names and phone come from the details. The payment method is added unless the member already has one with the same tokenisation result; a live subscription to the plan created since the completion started is adopted (an interrupted earlier run), an older one is 409. Answers are stored in billing beside the member (replacing the member's answers to the product's questions). A completion holds its wizard by a lease (CHECKOUT_COMPLETION_LEASE_SECONDS, 30 s by default) while it calls billing: a concurrent call waits for it and answers its ids, or 409 after 3 s; edits of the wizard answer 409 meanwhile; a run that died holds it until the lease expires, and the next run converges on what it made. onboarding.completed is recorded by the same statement that marks the invitation Completed, so it is emitted once; its data: { invitationId, customerAccountId, memberId, paymentMethodId, subscriptionId, planId, email }.

Billing engine
- Transactions: kind Charge | Refund; status Processing | Settled | Failed; amount is a positive decimal in major units on both kinds (stored as integer minor units). Each provider call carries the transaction id as its idempotency key.
- Billing runs (POST /api/admin/billing-runs, and a scheduler every BILLING_RUN_INTERVAL_MS with asOf = now): first settle Processing bank charges whose merchant's bankSettlementWindowDays have passed since occurredAt (BankAccount last4 ending 002 fails with insufficient_funds then, which makes the subscription PastDue for that period: a first charge failing so starts the retries at billingRetryOffsetsDays from then, a retry failing so counts as that retry, and the next is at its offset from the first failure, at once when that has passed, until the terminal action; cancelled at period end meanwhile, it is PastDue all the same and ends at that period's end once the period is collected; paused meanwhile, it stays Paused owing the period, nextBillingAt its next retry, nothing charged until it is resumed, when it becomes PastDue (see Subscriptions), or, when no retry is left, the terminal action applies at once: Cancel → Cancelled, Pause → it stays Paused with the period written off; cancelled meanwhile, only the charge fails); then reconcile provider calls left unconfirmed by a crashed or cut-off run, by repeating each with its key (the provider answers the first outcome, or makes the call if it never arrived); then charge every Active subscription with nextBillingAt ≤ asOf and every PastDue one whose retry is due, with occurredAt = asOf. A subscription with a charge still Processing (a bank debit in its settlement window, or a call whose outcome is unknown) is not charged again until that charge has settled or failed, so a period is never billed while the one before may still fail. A run makes one charge attempt per subscription at most (the payment methods of one attempt in rank order): a PastDue subscription several of whose retry dates have passed is retried once by each run, not declined again at once for each. A run charges a subscription for one period at most: one behind by several periods (its merchant had no gateway credentials, or a run names a distant asOf) is charged for the next of them by the next run (the scheduler's runs a minute apart), never for several at once. The result counts subscriptions: charged (charged, or found with no payment method left to try), retried (of those, the ones whose charge was a retry), succeeded (charges that paid their period: Settled, or Processing bank charges; with the unconfirmed calls of earlier runs that this run's reconciliation found so), failed (whose period failed: every method declined, or a bank charge failed at settlement), terminated (ended: the terminal action, or cancel at period end), skipped (due at a merchant without gateway credentials).
- Billing is in advance: a Settled or Processing charge makes its period current and the next one due at its end. The member's payment methods are tried in rank order until one succeeds; each attempt is its own transaction.
- When every method declines, the subscription becomes PastDue (subscription.past_due) and is retried at each of the merchant's billingRetryOffsetsDays after that first failure (attempt 2, 3, …, nextBillingAt = the next retry); a successful retry collects the same period and makes it Active again; when the retries are used up the terminal action applies: Cancel → Cancelled (subscription.cancelled), Pause → Paused (subscription.paused), which writes the period off: resumed, it starts a new period (Subscriptions, Resume).
- cancel { atPeriodEnd: true } ends the subscription (Cancelled, subscription.cancelled) at the run at or after the end of its paid period instead of charging it (an unpaid current period is charged first, see Subscriptions). Paused subscriptions are not charged. A merchant without gateway credentials is counted as skipped.
- A provider that is down or times out leaves the charge due; the next run completes it with the same idempotency key, so nothing is charged twice. Concurrent runs (and billing replicas) claim due subscriptions with FOR UPDATE SKIP LOCKED and a lease, and write each Processing charge before calling the provider: each due period is charged once.
- A charge or refund the provider refuses for good (an HTTP 4xx other than 408, 409, 425 and 429: an unknown or invalid token, a malformed request; it did not act on it) is Failed with failureReason provider_rejected and handled like a decline: a run falls back to the member's next payment method, and when none is left the subscription is PastDue and retried at billingRetryOffsetsDays up to the terminal action; a retry refused so answers 201 with the Failed charge, as for a decline. A refund refused so answers 409 (conflict, with transactionId and failureReason: provider_rejected in the problem): the refund is Failed (transaction.failed), nothing was refunded and its amount is refundable again. 408, 409, 425, 429, 5xx, timeouts and connection errors leave the outcome unknown (the rules above and the 502 below). failureReason values: card_declined and insufficient_funds (declines), provider_rejected, payment_method_removed (the method was removed before its unconfirmed charge was reconciled).
- Retry (POST /api/Transactions/{id}/retry): a Failed charge that has not been retried, of a period its subscription is still collecting → 201 new Charge, attempt + 1, originalTransactionId = the failed charge. Refund: a Settled charge; amount defaults to what is left; the refundable amount is reserved atomically on the charge (a compare-and-swap on its refunded amount, or under its row lock), so concurrent refunds never exceed it. A refund or retry whose provider call gets no answer (provider down, failing, or not answering within PAYMENT_PROVIDER_TIMEOUT_MS, when it may have acted) answers 502 provider-unavailable whose detail names the transaction: it stays Processing (a refund keeps its amount reserved) and the next billing run repeats the call with the same idempotency key and records the provider's one outcome (Settled with transaction.refunded, or Failed, which releases the reservation). It is neither lost nor applied twice; the 502 means "outcome unknown", so look the transaction up before refunding again with a new key.
- Platform fee: per charge, platformFeePercent of the amount plus platformFeeFixed in major units of the charge's currency, each rounded half-even to that currency's minor unit (defaults 1.5 and 0.30: 0.30 AUD is 30 cents, 0.30 KWD 300 fils, 0.30 JPY rounds to 0 yen; set on merchant create, changed with PATCH /api/admin/merchants/{id}), at most the charge amount, fixed when the charge is made.
- Fee statements: Draft (generate) → Finalised (finalise) → Paid (pay). Lines: the merchant's charges with occurredAt in [periodStart, periodEnd) that are Settled or Processing (feeAmount, netAmount = amount - feeAmount), and refunds in the period (negative amount, feeAmount 0, negative netAmount), in the statement currency (default AUD). Totals are the sums of the lines; lines are taken at generate and at finalise, then never change. reference is FS-<periodStart yyyymmdd>-<8 hex>.
- Events: transaction.succeeded (a charge settled), transaction.failed, transaction.refunded (data: the transaction as GET /api/Transactions/{id} shows it, plus transactionId), subscription.past_due, fee_statement.finalised, fee_statement.paid (data: statement id, statementId, merchantId, reference, status, period, totals, paymentReference).

Event backbone
- Every integration event is written to the emitting service's outbox table in the transaction of the change, published by the service's outbox relay to the JetStream stream EVENTS (subjects events.<type>, file storage, 2-minute duplicate window, 7-day retention) with Nats-Msg-Id = event id and the W3C trace context in the message headers, and marked published only after JetStream acknowledged it. The relay wakes on a Postgres NOTIFY at commit (and polls every OUTBOX_POLL_MS as a fallback), keeps retrying while NATS or Postgres is down, and prunes published rows after OUTBOX_RETENTION_HOURS (default 168).
`;

/** Section heading → its bullets (markdown list). */
const SECTIONS: Record<string, string> = (() => {
  const out: Record<string, string[]> = {};
  let current = '';
  for (const line of SECTIONS_TEXT.split('\n')) {
    if (!line.trim()) continue;
    if (line.startsWith('- ')) (out[current] ??= []).push(line);
    else current = line.trim();
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.join('\n')]));
})();

/** The bullets of one section (empty when there is none). */
export function decisionsFor(section: string): string {
  return SECTIONS[section] ?? '';
}

/** Catalogue bullets go to the tag they are about. */
function catalogueFor(tag: 'Products' | 'Questions' | 'Plans'): string {
  return decisionsFor('Catalogue (products, questions, plans)')
    .split('\n')
    .filter((b) => {
      const about = /^- (Question|Questions)/.test(b) ? 'Questions' : /^- (Plan|Billing periods)/.test(b) ? 'Plans' : 'Products';
      return about === tag || b.startsWith('- Writes need');
    })
    .join('\n');
}

const join = (...parts: string[]) => parts.filter(Boolean).join('\n\n');

/** Tag → the rules of its operations, shown with the tag in the reference. */
export const DECISION_TAGS: Record<string, string> = {
  Admin: join('Platform administration with the platform admin token.', decisionsFor('Merchants')),
  'API keys': join(decisionsFor('API keys and webhooks'), '**Webhook URLs**', decisionsFor('Webhooks').split('\n').filter((b) => /production mode|signing secret/.test(b)).join('\n')),
  Products: join(catalogueFor('Products'), '**Paged collections**', decisionsFor('Collections')),
  Questions: catalogueFor('Questions'),
  Plans: join(catalogueFor('Plans'), '**Money**', decisionsFor('Money')),
  Members: decisionsFor('Members'),
  'Payment methods': join(decisionsFor('Payment methods'), '**Test payment provider (sandbox)**', decisionsFor('Payment provider (sandbox)')),
  Subscriptions: join(decisionsFor('Subscriptions'), '**Events**', decisionsFor('Events (billing)')),
  Transactions: decisionsFor('Billing engine'),
  'Fee statements': decisionsFor('Billing engine').split('\n').filter((b) => /[Ff]ee/.test(b)).join('\n'),
  'Customer accounts': decisionsFor('Customer accounts'),
  'Webhook deliveries': join(decisionsFor('Webhooks'), '**Event backbone**', decisionsFor('Event backbone')),
  Invitations: decisionsFor('Invitations and self-serve onboarding').split('\n').filter((b) => !/\/api\/onboard/.test(b)).join('\n'),
  'Self-serve onboarding': decisionsFor('Invitations and self-serve onboarding').split('\n').filter((b) => /\/api\/onboard|[Ww]izard/.test(b)).join('\n'),
};

/** Sections placed above; any other (a section added later) is kept in the introduction, never dropped. */
const PLACED = new Set([
  'Authentication', 'Errors', 'Idempotency', 'Rate limits', 'Merchants', 'API keys and webhooks', 'Collections', 'Money', 'Catalogue (products, questions, plans)', 'Members',
  'Payment methods', 'Payment provider (sandbox)', 'Subscriptions', 'Events (billing)', 'Billing engine', 'Customer accounts', 'Webhooks', 'Event backbone', 'Invitations and self-serve onboarding',
]);
const UNPLACED = Object.keys(SECTIONS).filter((k) => !PLACED.has(k));

/** The document's introduction: what the API is and where its rules are. */
export const INTRODUCTION = [
  'The REST API of the subscription billing platform: merchants, API keys and webhooks, catalogue (products, questions, plans), members, payment methods, subscriptions, webhook deliveries, customer accounts, invitations and onboarding. All bodies are JSON; amounts are decimals in major units with an ISO 4217 currency.',
  '',
  '**Authentication**: `Authorization: Bearer <credential>`; see the *bearer* security scheme for the credential kinds. **Errors** are `application/problem+json` (see the *ProblemDetails* schema). **Idempotency**: operations that take an `Idempotency-Key` header describe its rules on that parameter. **Rate limits**: described on every 429 response. **Webhooks**: every event type and its payload is under *Webhook events*; delivery rules are with the *Webhook deliveries* operations.',
  ...UNPLACED.flatMap((k) => ['', `**${k}**`, '', SECTIONS[k]!]),
].join('\n');
