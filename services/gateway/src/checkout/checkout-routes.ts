import {
  BankCaptureResult,
  CaptureBankRequest,
  CheckoutCompletionResult,
  CheckoutDeepLinkResult,
  CheckoutLink,
  CheckoutSessionView,
  CompleteCheckoutRequest,
  CreateCheckoutLinkRequest,
  DomainError,
  ResolveCheckoutLinkRequest,
  UpdateCheckoutCustomerRequest,
  type ErrorCode,
} from '@billing/contracts';
import { toMajorUnits } from '@billing/money';
import type { Scope } from '@billing/proto-types/common/v1/Scope';
import type { MerchantAccess } from '../auth/access.js';
import { credentialScope, merchantCallScope } from '../auth/call-scope.js';
import type { Principal } from '../auth/principal.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, noContent, ok, type RouteResult, type RouteSpec } from '../http/route.js';

/** Each refused outcome of resolve as the error (and so the status) it is answered with (contract §6). */
const OUTCOME_ERRORS: Record<string, { code: ErrorCode; detail: string }> = {
  InvalidSignature: { code: 'unauthenticated', detail: 'The link is malformed or its signature does not match.' },
  ApiKeyNotFound: { code: 'unauthenticated', detail: 'The API key that signed the link is unknown, revoked or expired.' },
  MerchantMismatch: { code: 'unauthenticated', detail: 'The link names a merchant other than the signing key\'s.' },
  LinkExpired: { code: 'gone', detail: 'The link has expired.' },
  NonceAlreadyUsed: { code: 'conflict', detail: 'The link\'s nonce was already used by a different link.' },
  PlanNotFound: { code: 'not_found', detail: 'The link\'s plan does not exist, is inactive or belongs to another merchant.' },
};

const SIGNING_RECIPE = `Links may also be signed in the merchant's own code, exactly as this endpoint does:
d = base64url (no padding) of the UTF-8 JSON { "v": 1, "kid": <API key id>, "mid": <merchant id>, "pid": <plan id>, "nonce": <8..128 unique characters>, "exp": <unix seconds>, "returnUrl": <https URL>, "customer"?: { "email", "firstName", "lastName", "phone" } };
s = base64url (no padding) of HMAC-SHA256 over the ASCII bytes of d, keyed with the bytes of the key's signing secret (the base64 after "whsec_", decoded).
The link is <public base URL>/checkout?d=<d>&s=<s>. In TypeScript (Node):

    import { createHmac, randomUUID } from 'node:crypto';

    function checkoutLink(base: string, secret: string, kid: string, mid: string, pid: string, returnUrl: string, customer?: object): string {
      const payload = { v: 1, kid, mid, pid, nonce: randomUUID(), exp: Math.floor(Date.now() / 1000) + 3600, returnUrl, customer };
      const d = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
      const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
      const s = createHmac('sha256', key).update(d, 'ascii').digest('base64url');
      return \`\${base}/checkout?d=\${d}&s=\${s}\`;
    }`;

/** The session a checkout token stands for; a body naming another session is not found. */
function sessionOf(principal: Principal, named?: string): { scope: Scope; sessionId: string } {
  if (principal.kind !== 'checkout') throw new DomainError('unauthenticated', 'A checkout session token is required.');
  if (named !== undefined && named.toLowerCase() !== principal.sessionId) throw new DomainError('not_found', 'Checkout session not found.');
  return { scope: credentialScope(principal), sessionId: principal.sessionId };
}

const orNull = <T>(v: T | undefined) => v ?? null;

export function checkoutRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const checkout = backends.checkout.checkout;
  /**
   * The returnUrl of the caller's checkout session, for completion results the service answers
   * without one (a body failing its schema, Pending): every completion result names where the
   * browser goes next. Null without a checkout credential (a body refused before authentication).
   */
  const returnUrlOf = async (principal: Principal | undefined): Promise<string | null> =>
    principal?.kind === 'checkout' ? (await checkout.GetSession(sessionOf(principal))).returnUrl || null : null;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Checkout/links',
      tag: 'Hosted checkout',
      summary: 'Create a signed checkout link',
      description: `Signs a deep link to the hosted checkout page for a plan. An API key signs with its own signing secret; a merchant user (Admin or Owner) or the platform admin names the key in apiKeyId. expiresInMinutes: 1 to 10080, default 60. returnUrl: absolute https (plain http only to a loopback host outside production: localhost, 127.0.0.0/8 or ::1), kept exactly as sent: one holding whitespace or a control character anywhere is 400 (in a signed d: InvalidSignature), never trimmed. 201 with Location = url. Plan unknown: 404; inactive: 422; apiKeyId not a usable key of the merchant: 400.\n\n${SIGNING_RECIPE}`,
      auth: { merchant: 'Admin' },
      body: CreateCheckoutLinkRequest,
      responses: { 201: CheckoutLink, 400: null, 403: null, 404: null, 422: null },
      handler: async ({ body, principal }) => {
        const scope = await merchantCallScope(access, principal, body.merchantId);
        let apiKeyId = body.apiKeyId ?? undefined;
        if (principal.kind === 'apiKey') {
          if (apiKeyId && apiKeyId.toLowerCase() !== principal.apiKeyId) throw DomainError.field('apiKeyId', 'An API key signs links with itself; omit apiKeyId or name this key.');
          apiKeyId = principal.apiKeyId;
        }
        if (!apiKeyId) throw DomainError.field('apiKeyId', 'Required: the API key whose signing secret signs the link.');
        const c = body.customer;
        const link = await checkout.CreateLink({
          scope,
          apiKeyId,
          planId: body.planId,
          returnUrl: body.returnUrl,
          customer: c ? { email: c.email ?? undefined, firstName: c.firstName ?? undefined, lastName: c.lastName ?? undefined, phone: c.phone ?? undefined } : undefined,
          expiresInMinutes: body.expiresInMinutes ?? undefined,
        });
        return created(link, link.url);
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Checkout/sessions/resolve',
      tag: 'Hosted checkout',
      summary: 'Resolve a checkout deep link into a session',
      description:
        'Anonymous (rate limited per client IP). Checks, in order: d undecodable (not base64url of the payload JSON in valid UTF-8, a customer.email that is not an email address, or a string no field can store: a NUL or an unpaired surrogate) → InvalidSignature 401; key unknown, revoked or expired → ApiKeyNotFound 401; signature wrong → InvalidSignature 401; mid not the key\'s merchant → MerchantMismatch 401; exp past → LinkExpired 410; nonce already used by a different d → NonceAlreadyUsed 409; plan unknown, inactive or another merchant\'s → PlanNotFound 404; else Ok 200. Refusals are problem details with the extension member outcome. Replaying the same d and s answers the same sessionId with a fresh sessionToken (a checkout-session JWT with sid, mid, scope "checkout", valid 30 minutes, accepted only by /api/Checkout/sessions/me endpoints), also after the link\'s exp has passed (but not after the signing key was revoked: the key is checked first, so ApiKeyNotFound 401 then; a revoke withdraws the merchant\'s links at once: none resolves again; a session already opened keeps its session token and may still be completed until that token expires, as a customer in the middle of paying is not cut off), for 30 minutes from the first resolve that opened the session (so a visitor whose link expires mid-checkout keeps the session on reload); after that, and for an expired link that opened no session, LinkExpired 410. The HMAC is compared in constant time.',
      auth: { anonymous: true },
      body: ResolveCheckoutLinkRequest,
      responses: { 200: CheckoutDeepLinkResult, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body }) => {
        const r = await checkout.ResolveLink({ d: body.d, s: body.s });
        const refusal = OUTCOME_ERRORS[r.outcome];
        if (refusal) throw new DomainError(refusal.code, refusal.detail, { outcome: r.outcome });
        return ok({ outcome: r.outcome, sessionId: orNull(r.sessionId), sessionToken: orNull(r.sessionToken), expiresAt: orNull(r.expiresAt) });
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Checkout/sessions/me',
      tag: 'Hosted checkout',
      summary: 'Read the checkout session of the token',
      description: 'Checkout-session token only. status: Open or Completed. plan.amount is a decimal in major units of plan.currency.',
      auth: { checkout: true },
      responses: { 200: CheckoutSessionView, 404: null },
      handler: async ({ principal }) => {
        const s = await checkout.GetSession(sessionOf(principal));
        const plan = s.plan!;
        const c = s.customer ?? {};
        return ok({
          sessionId: s.sessionId,
          merchantName: s.merchantName,
          plan: { name: plan.name, amount: toMajorUnits(Number(plan.amountMinor), plan.currency), currency: plan.currency, interval: plan.interval, intervalCount: plan.intervalCount },
          customer: { email: orNull(c.email), firstName: orNull(c.firstName), lastName: orNull(c.lastName), phone: orNull(c.phone) },
          status: s.status,
          returnUrl: s.returnUrl,
        });
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/Checkout/sessions/me/customer',
      tag: 'Hosted checkout',
      summary: "Set the session's customer details",
      description: 'Checkout-session token only. 204. phone: absent leaves the session\'s as it is (the one the link carried, say); null clears it; strings are stored as sent. A completed session: 409; so is a session whose completion is running (the completion provisions the details it took; retry once it has answered).',
      auth: { checkout: true },
      body: UpdateCheckoutCustomerRequest,
      responses: { 204: null, 400: null, 404: null, 409: null },
      handler: async ({ body, principal }) => {
        await checkout.UpdateSessionCustomer({ ...sessionOf(principal), email: body.email, firstName: body.firstName, lastName: body.lastName, phone: body.phone ?? undefined, phoneCleared: body.phone === null });
        return noContent();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Checkout/sessions/me/capture-bank',
      tag: 'Hosted checkout',
      summary: 'Tokenise a bank account for the session',
      description:
        'Checkout-session token only. accountName: 1 to 200 characters (counted as characters, not UTF-16 units), at least one not whitespace, kept exactly as sent; bsb: 6 digits with an optional hyphen after the third; accountNumber: 5 to 9 digits; else 400. The payment provider tokenises the details; only the token, the BSB, the account name and the last 4 digits are stored (the account number is never stored, logged or echoed). sessionId is optional (the token names the session); absent or null uses the token\'s session; another session\'s id: 404; a completed session: 409; provider unreachable: 502. The token (btok_...) is usable with complete, and with payment-methods/from-token by the same merchant.',
      auth: { checkout: true },
      body: CaptureBankRequest,
      responses: { 200: BankCaptureResult, 400: null, 404: null, 409: null, 502: null },
      handler: async ({ body, principal }) => {
        const r = await checkout.CaptureBank({ ...sessionOf(principal, body.sessionId ?? undefined), accountName: body.accountName, bsb: body.bsb, accountNumber: body.accountNumber });
        return ok({ providerToken: r.providerToken || null });
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Checkout/sessions/me/complete',
      tag: 'Hosted checkout',
      summary: 'Complete the checkout',
      description:
        'Checkout-session token only. Ensures the customer account (unclaimed when new), the member (the existing one for the email), the payment method (from the token) and the subscription, then fires checkout.completed (data: sessionId, memberId, paymentMethodId, subscriptionId, planId, customerAccountId, email, firstName, lastName, completedAt) exactly once. 200 { status: "Completed", returnUrl, failureReason: null }; a repeated call answers the same and creates nothing. 400 { status: "Failed", failureReason }: the token is empty, unknown, another session\'s or another merchant\'s; the customer\'s email, firstName or lastName is missing or not valid (failureReason names them); the body fails its schema (no providerToken, a sessionId that is not a uuid: failureReason names the fields), is not valid JSON or holds text no service may store (a NUL character). Every completion result, Failed and Pending ones too, carries the session\'s returnUrl (null only when the request\'s credential is not a usable checkout-session token). 409 { status: "Failed" }: the member already has a live subscription to the plan, or the plan is no longer active; such a completion is refused before anything is written (no member, payment method or event is added), also when completions for the same email and plan (of other sessions, or onboardings) run at once: they take turns in billing, exactly one completes and the others answer this 409 having added nothing. 409 { status: "Pending" }: another completion of the session is running, or one for the same email and plan has been running for 3 seconds; retry shortly. These bodies are completion results, not problem details. sessionId other than the token\'s: 400 { status: "Failed", returnUrl of the token\'s session, failureReason }; provider unreachable: 502 (problem details).',
      auth: { checkout: true },
      body: CompleteCheckoutRequest,
      responses: { 200: CheckoutCompletionResult, 400: CheckoutCompletionResult, 409: CheckoutCompletionResult, 502: null },
      // A body that fails its schema is a Failed completion result too (interface.md: 200, 400 and 409 all return one).
      invalidBody: async (e, principal) => completionResult(400, { status: 'Failed', returnUrl: await returnUrlOf(principal), failureReason: `The request is not valid: ${describeFieldErrors(e)}`, errors: e.extensions.errors }),
      handler: async ({ body, principal }) => {
        // Another session's id is a Failed completion result too (this endpoint answers no 404), with the token's session's returnUrl.
        if (principal.kind === 'checkout' && body.sessionId.toLowerCase() !== principal.sessionId) {
          const own = await checkout.GetSession(sessionOf(principal));
          return completionResult(400, { status: 'Failed', returnUrl: own.returnUrl, failureReason: 'sessionId is not the session of this checkout token.' });
        }
        const r = await checkout.CompleteSession({ ...sessionOf(principal, body.sessionId), providerToken: body.providerToken });
        const status = r.status === 'Completed' ? 200 : r.status === 'Pending' || r.failureKind === 'subscription_exists' || r.failureKind === 'plan_inactive' ? 409 : 400;
        return completionResult(status, { status: r.status, returnUrl: r.returnUrl || (await returnUrlOf(principal)), failureReason: r.failureReason });
      },
    }),
  ];
}

/** A checkout completion result (interface.md), never problem details, whatever its status. */
function completionResult(status: number, r: { status: string; returnUrl?: string | null; failureReason?: string | null; errors?: Record<string, string[]> }): RouteResult {
  const body = { status: r.status, returnUrl: r.returnUrl ?? null, failureReason: r.failureReason ?? null, ...(r.errors ? { errors: r.errors } : {}) };
  return { status, body, contentType: 'application/json; charset=utf-8' };
}

/** "field: message; other: message" of a validation failure. */
function describeFieldErrors(e: DomainError): string {
  return Object.entries(e.extensions.errors ?? {}).map(([field, messages]) => `${field}: ${messages.join(' ')}`).join('; ') || e.message;
}
