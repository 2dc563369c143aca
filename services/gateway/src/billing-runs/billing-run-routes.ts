import { BillingRunRequest, BillingRunResult } from '@billing/contracts';
import { credentialScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { defineRoute, ok, type RouteSpec } from '../http/route.js';

export function billingRunRoutes(backends: Backends): RouteSpec[] {
  return [
    defineRoute({
      method: 'POST',
      url: '/api/admin/billing-runs',
      tag: 'Admin',
      summary: 'Run billing as of a point in time',
      description:
        'Runs everything due at `asOf` (date or date-time; default now), in order: settles Processing bank charges whose settlement window has passed; reconciles provider calls a crashed or cut-off run left unconfirmed (repeated with the same idempotency key, never charged twice); charges every Active subscription with nextBillingAt ≤ asOf and every PastDue one whose retry is due, trying the subscription\'s own payment method, then the member\'s others in rank order: one attempt per subscription and run, and none while an earlier charge of it is still Processing. Counts are of subscriptions: charged (a charge attempted, retries included), succeeded (Settled or Processing, also when the subscription was cancelled while the charge was in flight: the charge stands), failed (every method declined, or a bank debit failed at settlement; also a charge declined after its subscription was cancelled or paused while the charge was in flight: no other method is tried then), retried (charged as a retry), terminated (ended by the terminal action or cancel-at-period-end), skipped (merchant without gateway credentials). Every charge of the run that got an answer counts once, as succeeded or failed; one whose outcome is unknown (the provider did not answer) is counted by the run that reconciles it (as succeeded, or as failed when its subscription is charged again and fails). A scheduler in the billing service runs it every BILLING_RUN_INTERVAL_MS.',
      auth: { admin: true },
      body: BillingRunRequest,
      responses: { 200: BillingRunResult, 400: null, 401: null },
      handler: async ({ body, principal }) => ok(await backends.billing.billingRuns.RunBilling({ scope: credentialScope(principal), asOf: body.asOf ?? undefined })),
    }),
  ];
}
