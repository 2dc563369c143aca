import { z } from 'zod';
import { CancelSubscriptionRequest, CreateSubscriptionRequest, ListSubscriptionsQuery, Paged, PathId, PauseSubscriptionRequest, ResumeSubscriptionRequest, Subscription, SUBSCRIPTION_STATUSES, toPage, Uuid } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { PLATFORM_SCOPE } from '@billing/service-runtime';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { assertSameId, oneOf, orNull } from '../http/views.js';
import type { Subscription__Output } from '@billing/proto-types/billing/v1/Subscription';

export function toSubscription(s: Subscription__Output): Subscription {
  return {
    id: s.id,
    merchantId: s.merchantId,
    memberId: s.memberId,
    planId: s.planId,
    paymentMethodId: orNull(s.paymentMethodId),
    status: oneOf(SUBSCRIPTION_STATUSES, s.status, 'status'),
    currentPeriodStart: s.currentPeriodStart,
    currentPeriodEnd: s.currentPeriodEnd,
    nextBillingAt: orNull(s.nextBillingAt),
    cancelAtPeriodEnd: s.cancelAtPeriodEnd,
    pausedAt: orNull(s.pausedAt),
    resumeAt: orNull(s.resumeAt),
    cancelledAt: orNull(s.cancelledAt),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

const IdParams = z.object({ id: PathId });

export function subscriptionRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const subscriptions = backends.billing.subscriptions;
  /** For the platform admin's Idempotency-Keys: the subscription's merchant. */
  const ownerOf = { param: 'id', merchantOf: async (id: string) => (await subscriptions.GetSubscription({ scope: PLATFORM_SCOPE, id })).merchantId };
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Subscriptions',
      tag: 'Subscriptions',
      summary: 'Enrol a member in a plan',
      description:
        'Billing is in advance: currentPeriodStart is startDate (date or date-time; default now) and the first charge is due then (nextBillingAt); with trialDays the trial is a free first period and the first charge is due when it ends. Member, plan or payment method unknown or of another merchant: 404; paymentMethodId of another member: 400; inactive plan: 422; a live (not Cancelled) subscription for the member and plan already exists: 409 subscription-exists with existingSubscriptionId. Emits subscription.created. Requires an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      idempotent: true,
      body: CreateSubscriptionRequest,
      responses: { 201: Subscription, 400: null, 403: null, 404: null, 409: null, 422: null },
      handler: async ({ body, principal }) => {
        const scope = await merchantCallScope(access, principal, body.merchantId);
        const sub = toSubscription(
          await subscriptions.CreateSubscription({
            scope,
            memberId: body.memberId,
            planId: body.planId,
            paymentMethodId: body.paymentMethodId ?? undefined,
            startDate: body.startDate ?? undefined,
          }),
        );
        return created(sub, `/api/Subscriptions/${sub.id}`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Subscriptions',
      tag: 'Subscriptions',
      summary: "List a merchant's subscriptions",
      description: 'Oldest first; optional filters memberId, planId and status (Active | Paused | PastDue | Cancelled).',
      auth: { merchant: 'Viewer' },
      query: ListSubscriptionsQuery,
      responses: { 200: Paged(Subscription), 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await subscriptions.ListSubscriptions({ scope, memberId: query.memberId, planId: query.planId, status: query.status, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toSubscription), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Subscriptions/:id',
      tag: 'Subscriptions',
      summary: 'Read a subscription',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: Subscription, 404: null },
      handler: async ({ params, principal }) => ok(toSubscription(await subscriptions.GetSubscription({ scope: await callScope(access, principal), id: params.id }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Subscriptions/:id/pause',
      tag: 'Subscriptions',
      summary: 'Pause a subscription',
      description: 'Active or PastDue → Paused; billing stops. resumeAt (optional, in the future) records when it should resume. Paused or Cancelled: 409. Emits subscription.paused. Requires an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: IdParams,
      body: PauseSubscriptionRequest,
      responses: { 200: Subscription, 400: null, 404: null, 409: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const scope = await callScope(access, principal, body.merchantId);
        return ok(toSubscription(await subscriptions.PauseSubscription({ scope, id: params.id, resumeAt: body.resumeAt ?? undefined })));
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Subscriptions/:id/resume',
      tag: 'Subscriptions',
      summary: 'Resume a paused subscription',
      description:
        'Paused → Active (PastDue when it still owes a period whose charge failed before or during the pause; a period the terminal action Pause wrote off is not owed: it resumes Active). If the pause covered the next due date, a new period starts now and is due at once; otherwise the paid period continues. Set to cancel at its period end and that period ended during the pause: Cancelled instead (subscription.cancelled). Not Paused: 409. Emits subscription.resumed. Requires an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: IdParams,
      body: ResumeSubscriptionRequest,
      responses: { 200: Subscription, 404: null, 409: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const scope = await callScope(access, principal, body.merchantId);
        return ok(toSubscription(await subscriptions.ResumeSubscription({ scope, id: params.id })));
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Subscriptions/:id/cancel',
      tag: 'Subscriptions',
      summary: 'Cancel a subscription',
      description:
        'Cancels now (status Cancelled, cancelledAt set, emits subscription.cancelled). With atPeriodEnd true an Active subscription stays Active with cancelAtPeriodEnd true and is cancelled by the billing run when its period ends (the event is emitted then); a Paused or PastDue one is cancelled at once. Already Cancelled: 409. Requires an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: IdParams,
      body: CancelSubscriptionRequest,
      responses: { 200: Subscription, 404: null, 409: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const scope = await callScope(access, principal, body.merchantId);
        return ok(toSubscription(await subscriptions.CancelSubscription({ scope, id: params.id, atPeriodEnd: Boolean(body.atPeriodEnd) })));
      },
    }),
  ];
}
