import { z } from 'zod';
import { AdminCreateApiKeyRequest, ApiKey, CreateApiKeyRequest, CreatedApiKey, Paged, PageQuery, PathId, toPage, UpdateWebhookRequest, Uuid } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import type { CredentialFeed } from '../auth/credential-feed.js';
import { callScope, credentialScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import type { Logger } from '@billing/service-runtime';
import { syncWebhookEndpoint } from './endpoint-sync.js';
import { created, defineRoute, noContent, ok, type RouteSpec } from '../http/route.js';
import { assertSameId, orNull, present } from '../http/views.js';
import type { ApiKey__Output } from '@billing/proto-types/identity/v1/ApiKey';
import type { CreatedApiKey__Output } from '@billing/proto-types/identity/v1/CreatedApiKey';

export function toApiKey(k: ApiKey__Output): ApiKey {
  return {
    id: k.id,
    name: k.name,
    keyPrefix: k.keyPrefix,
    signingSecretPrefix: k.signingSecretPrefix,
    webhookUrl: orNull(k.webhookUrl),
    webhookEvents: k.webhookEventsAll ? null : k.webhookEvents,
    webhookEnabled: k.webhookEnabled,
    expiresAt: orNull(k.expiresAt),
    lastUsedAt: orNull(k.lastUsedAt),
    revokedAt: orNull(k.revokedAt),
    createdAt: k.createdAt,
  };
}

function toCreatedApiKey(res: CreatedApiKey__Output): CreatedApiKey {
  return { ...toApiKey(present(res.apiKey, 'apiKey')), key: res.key, signingSecret: res.signingSecret };
}

const IdParams = z.object({ id: PathId });

export function apiKeyRoutes(backends: Backends, access: MerchantAccess, feed: CredentialFeed, logger: Logger): RouteSpec[] {
  const keys = backends.identity.apiKeys;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/admin/merchants/:id/api-keys',
      tag: 'Admin',
      summary: 'Create an API key for a merchant',
      description: 'The plaintext `key` (sk_ + 43 base64url characters) and `signingSecret` (whsec_ + base64) are returned once; the key is stored as SHA-256 and the secret encrypted.',
      auth: { admin: true },
      params: IdParams,
      body: AdminCreateApiKeyRequest,
      responses: { 201: CreatedApiKey, 400: null, 404: null },
      handler: async ({ params, body, principal }) => {
        const scope = await merchantCallScope(access, principal, params.id);
        const res = toCreatedApiKey(await keys.CreateApiKey({ scope, name: body.name, expiresAt: body.expiresAt ?? undefined }));
        return created(res, `/api/ApiKeys/${res.id}`);
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/ApiKeys',
      tag: 'API keys',
      summary: 'Create an API key',
      description: 'Admin role or an API key. The plaintext key and signing secret are returned once.',
      auth: { merchant: 'Admin' },
      body: CreateApiKeyRequest,
      responses: { 201: CreatedApiKey, 400: null, 403: null, 404: null },
      handler: async ({ body, principal }) => {
        const scope = await merchantCallScope(access, principal, body.merchantId);
        const res = toCreatedApiKey(await keys.CreateApiKey({ scope, name: body.name, expiresAt: body.expiresAt ?? undefined }));
        return created(res, `/api/ApiKeys/${res.id}`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/ApiKeys',
      tag: 'API keys',
      summary: "List a merchant's API keys",
      auth: { merchant: 'Viewer' },
      query: PageQuery.extend({ merchantId: Uuid.optional() }),
      responses: { 200: Paged(ApiKey), 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await keys.ListApiKeys({ scope, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toApiKey), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/ApiKeys/:id',
      tag: 'API keys',
      summary: 'Read an API key',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: ApiKey, 404: null },
      handler: async ({ params, principal }) => ok(toApiKey(await keys.GetApiKey({ scope: credentialScope(principal), id: params.id }))),
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/ApiKeys/:id',
      tag: 'API keys',
      summary: 'Revoke an API key',
      description: 'Takes effect on the very next request at this gateway and within a second at every other replica. Revoking a revoked key is a no-op (204). When it answers, webhooks have stopped: no event raised after the answer is delivered to the key, its Pending deliveries have failed, a replay of its deliveries is 409, and the key reads webhookEnabled false (its webhookUrl and webhookEvents are kept as set). If the webhooks service cannot be reached at that moment the revocation still stands (204); webhooks stop as soon as that service is back and has read the change (the answer does not wait for it).',
      auth: { merchant: 'Admin' },
      params: IdParams,
      responses: { 204: null, 404: null },
      handler: async ({ params, principal }) => {
        const scope = credentialScope(principal);
        const key = await keys.RevokeApiKey({ scope, id: params.id });
        feed.apply({ kind: 'api_key', subjectId: key.id, revoked: true, at: present(key.revokedAt, 'revokedAt') });
        await syncWebhookEndpoint(backends.webhooks, logger, scope, key.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'PUT',
      url: '/api/ApiKeys/:id/webhook',
      tag: 'API keys',
      summary: 'Set the webhook URL, subscribed event types and enabled flag of a key',
      description:
        'Absent fields are unchanged; `webhookUrl: null` clears it; `webhookEvents: null` subscribes to every event type and `[]` to none; unknown type names are 400. The URL is stored exactly as sent, at most 2048 characters; one holding whitespace or a control character anywhere (leading or trailing too) is 400, never trimmed, and so is one carrying credentials (a user name or password before the host, `user:password@`; receivers authenticate the sender by the signature). It must be absolute https (http only to loopback hosts outside production: localhost, 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8, never a name that merely begins with such an address); in production a URL whose host (or any address it resolves to) is not global unicast is 400 — loopback, private, link-local, CGNAT, multicast, reserved and documentation ranges, also inside IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms — and a host name that does not resolve when the URL is set is 400 too ("Host does not resolve."), since its addresses cannot be judged, while a lookup that fails for the moment (DNS not answering) is 503 with Retry-After and changes nothing. Enabling requires a URL. A revoked key: 400 naming id (it gets no webhooks). The new settings are in force for webhooks when it answers: events raised after the answer are delivered (or not) by them, and a replay sent after it goes to the new URL. If the webhooks service cannot be reached at that moment the change still stands (200), and it takes effect for webhooks as soon as that service is back and has read it (the answer does not wait for it).',
      auth: { merchant: 'Admin' },
      params: IdParams,
      body: UpdateWebhookRequest,
      responses: { 200: ApiKey, 400: null, 403: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const scope = await callScope(access, principal, body.merchantId);
        const res = await keys.UpdateWebhook({
          scope,
          id: params.id,
          setWebhookUrl: body.webhookUrl !== undefined,
          webhookUrl: body.webhookUrl ?? undefined,
          setWebhookEvents: body.webhookEvents !== undefined,
          webhookEventsAll: body.webhookEvents === null,
          webhookEvents: body.webhookEvents ?? [],
          webhookEnabled: body.webhookEnabled,
        });
        await syncWebhookEndpoint(backends.webhooks, logger, scope, res.id);
        return ok(toApiKey(res));
      },
    }),
  ];
}
