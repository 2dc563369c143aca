import { z } from 'zod';
import { ATTEMPT_ERRORS, ATTEMPT_TRIGGERS, DELIVERY_STATUSES, ListWebhookDeliveriesQuery, Paged, PathId, ReplayAccepted, toPage, Uuid, WebhookAttempt, WebhookDelivery } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { credentialScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { defineRoute, ok, type RouteSpec } from '../http/route.js';
import { oneOf, orNull } from '../http/views.js';
import type { Attempt__Output } from '@billing/proto-types/webhooks/v1/Attempt';
import type { Delivery__Output } from '@billing/proto-types/webhooks/v1/Delivery';

function toWebhookAttempt(a: Attempt__Output): WebhookAttempt {
  return {
    id: a.id,
    attemptedAt: a.attemptedAt,
    trigger: oneOf(ATTEMPT_TRIGGERS, a.trigger, 'trigger'),
    statusCode: orNull(a.statusCode),
    durationMs: a.durationMs,
    error: a.error === undefined ? null : oneOf(ATTEMPT_ERRORS, a.error, 'error'),
    responseBody: orNull(a.responseBody),
  };
}

export function toWebhookDelivery(d: Delivery__Output): WebhookDelivery {
  return {
    id: d.id,
    eventId: d.eventId,
    eventType: d.eventType,
    apiKeyId: d.apiKeyId,
    url: d.url,
    status: oneOf(DELIVERY_STATUSES, d.status, 'status'),
    attemptCount: d.attemptCount,
    nextAttemptAt: orNull(d.nextAttemptAt),
    createdAt: d.createdAt,
    attempts: d.attempts.map(toWebhookAttempt),
  };
}

const IdParams = z.object({ id: PathId });

const DELIVERY_DESCRIPTION =
  'A delivery is one event sent to one API key\'s webhook endpoint. status: Pending (attempts continue), Succeeded (a 2xx arrived within 15 s), Failed (the retry schedule is used up). attempts lists every attempt, oldest first, with its trigger (Scheduled or Manual), status code (null when no response arrived), duration, error and the first 1 KiB of the response body; attemptCount is their number.';

export function webhookDeliveryRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const deliveries = backends.webhooks.deliveries;
  return [
    defineRoute({
      method: 'GET',
      url: '/api/WebhookDeliveries',
      tag: 'Webhook deliveries',
      summary: "List a merchant's webhook deliveries",
      description: `${DELIVERY_DESCRIPTION} Newest first; filter by status and eventType.`,
      auth: { merchant: 'Viewer' },
      query: ListWebhookDeliveriesQuery,
      responses: { 200: Paged(WebhookDelivery), 400: null, 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await deliveries.ListDeliveries({ scope, status: query.status, eventType: query.eventType, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toWebhookDelivery), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/WebhookDeliveries/:id',
      tag: 'Webhook deliveries',
      summary: 'Read a webhook delivery with its attempts',
      description: DELIVERY_DESCRIPTION,
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: WebhookDelivery, 404: null },
      handler: async ({ params, principal }) => ok(toWebhookDelivery(await deliveries.GetDelivery({ scope: credentialScope(principal), id: params.id }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/WebhookDeliveries/:id/replay',
      tag: 'Webhook deliveries',
      summary: 'Send a delivery again',
      description:
        'Queues a new Manual attempt on every call and answers 202 with its attemptId; the attempt appears in the delivery once made (normally within a second). It carries the same webhook-id with a new webhook-timestamp and signature, goes to the key\'s current webhook URL (also while its webhook is disabled), and does not change the retry schedule; if it succeeds, a Pending or Failed delivery becomes Succeeded. A delivery whose API key is revoked, or whose key has no webhook URL any more, is 409 (a replay never goes to a URL the key no longer has). Does not take an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      params: IdParams,
      responses: { 202: ReplayAccepted, 404: null, 409: null },
      handler: async ({ params, principal }) => {
        const res = await deliveries.ReplayDelivery({ scope: credentialScope(principal), id: params.id });
        return { status: 202, body: { attemptId: res.attemptId } };
      },
    }),
  ];
}
