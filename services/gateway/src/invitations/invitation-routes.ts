import { z } from 'zod';
import { CreateInvitationRequest, DomainError, Invitation, INVITATION_STATUSES, InvitationResult, ListInvitationsQuery, Paged, PathId, toPage, Uuid } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { credentialScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { defineRoute, noContent, ok, type RouteSpec } from '../http/route.js';
import { oneOf, orNull, present } from '../http/views.js';
import type { Invitation__Output } from '@billing/proto-types/checkout/v1/Invitation';

function toInvitation(i: Invitation__Output): Invitation {
  return {
    id: i.id,
    merchantId: i.merchantId,
    firstName: i.firstName,
    lastName: i.lastName,
    email: orNull(i.email),
    phone: orNull(i.phone),
    status: oneOf(INVITATION_STATUSES, i.status, 'status'),
    expiresAt: i.expiresAt,
    createdAt: i.createdAt,
    acceptedAt: orNull(i.acceptedAt),
    completedAt: orNull(i.completedAt),
    revokedAt: orNull(i.revokedAt),
    memberId: orNull(i.memberId),
    subscriptionId: orNull(i.subscriptionId),
  };
}

const IdParams = z.object({ id: PathId });

export function invitationRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const invitations = backends.checkout.invitations;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Invitations',
      tag: 'Invitations',
      summary: 'Invite a person to onboard themselves',
      description:
        'Mints an onboarding link `{public base}/onboard?token=...` and delivers it by email (when `email` is given) and by SMS (when `phone` is given and an SMS channel is configured). The token is 32 random bytes, returned here exactly once; only its SHA-256 is stored. An email without a customer account gets an unclaimed one, which the invitee claims by signing up. At least one of email and phone (400). Outcomes: Ok 200; MerchantNotFound 404 and NoDeliveryChannel 422 (only a phone and no SMS channel), both problem details with `outcome`. Delivered or not created: when the link cannot be delivered (the mail server refuses the address or fails, the SMS provider fails), the answer is 502 problem details of type delivery-failed and nothing is left behind (no invitation, no account), so the same request may be retried and makes one invitation; once the email went out, a failing SMS does not undo the invitation (200). expiresInDays 1..90; without it the default of the deployment (7 days unless the operator sets INVITATION_DEFAULT_EXPIRY_DAYS).',
      auth: { merchant: 'Admin' },
      body: CreateInvitationRequest,
      responses: { 200: InvitationResult, 400: null, 403: null, 404: null, 422: null, 502: null },
      handler: async ({ body, principal }) => {
        await access.assert(principal, body.merchantId).catch((e: unknown) => {
          if (e instanceof DomainError && e.code === 'merchant_not_found') throw new DomainError('merchant_not_found', e.message, { outcome: 'MerchantNotFound' });
          throw e;
        });
        const res = await invitations.CreateInvitation({
          scope: credentialScope(principal),
          merchantId: body.merchantId.toLowerCase(),
          firstName: body.firstName,
          lastName: body.lastName,
          email: body.email ?? undefined,
          phone: body.phone || undefined,
          expiresInDays: body.expiresInDays ?? undefined,
        });
        const inv = present(res.invitation, 'invitation');
        const result: InvitationResult = { outcome: 'Ok', invitationId: inv.id, token: res.token, expiresAt: inv.expiresAt, email: inv.email ?? null, phone: inv.phone ?? null };
        return ok(result);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Invitations',
      tag: 'Invitations',
      summary: "List a merchant's invitations",
      description: 'Newest first; optional filters status (Pending | Accepted | Completed | Revoked | Expired) and email (the whole email, any letter case). merchantId defaults to the credential\'s merchant (required with the platform admin token).',
      auth: { merchant: 'Viewer' },
      query: ListInvitationsQuery,
      responses: { 200: Paged(Invitation), 400: null, 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const merchantId = await access.resolve(principal, query.merchantId);
        const res = await invitations.ListInvitations({ scope: credentialScope(principal), merchantId, status: query.status, email: query.email, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toInvitation), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Invitations/:id',
      tag: 'Invitations',
      summary: 'Read an invitation',
      description: 'Never returns the token. Another merchant\'s invitation is 404.',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: Invitation, 404: null },
      handler: async ({ params, principal }) => ok(toInvitation(await invitations.GetInvitation({ scope: credentialScope(principal), id: params.id }))),
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/Invitations/:id',
      tag: 'Invitations',
      summary: 'Revoke an invitation',
      description: 'Idempotent (204). The link then answers 410, and so do the wizard\'s steps and its completion; reading the wizard (GET /api/onboard/{invitationId}) still answers 200 with status Revoked. A completed invitation cannot be revoked (409), nor one whose completion is in progress (409).',
      auth: { merchant: 'Admin' },
      params: IdParams,
      responses: { 204: null, 404: null, 409: null },
      handler: async ({ params, principal }) => {
        await invitations.RevokeInvitation({ scope: credentialScope(principal), id: params.id });
        return noContent();
      },
    }),
  ];
}
