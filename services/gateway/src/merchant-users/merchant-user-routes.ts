import { z } from 'zod';
import { CreateMerchantUserRequest, MERCHANT_ROLES, MerchantLoginRequest, MerchantSignInResult, MerchantUser, Paged, PageQuery, PathId, toPage, UpdateMerchantUserRequest, Uuid } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { merchantCallScope } from '../auth/call-scope.js';
import type { CredentialFeed } from '../auth/credential-feed.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { oneOf, present } from '../http/views.js';
import type { MerchantUser__Output } from '@billing/proto-types/identity/v1/MerchantUser';

export function toMerchantUser(u: MerchantUser__Output): MerchantUser {
  return { id: u.id, merchantId: u.merchantId, email: u.email, fullName: u.fullName, role: oneOf(MERCHANT_ROLES, u.role, 'role'), isActive: u.isActive };
}

export function merchantUserRoutes(backends: Backends, access: MerchantAccess, feed: CredentialFeed): RouteSpec[] {
  const users = backends.identity.merchantUsers;
  /**
   * What the routes of one merchant user share. Contract §1: "Owner: Admin plus merchant users",
   * so besides the platform admin an Owner of the merchant manages its users; every other role
   * is 403. API keys are integration credentials, not among them (401).
   */
  const oneUser = {
    url: '/api/admin/merchants/:id/users/:userId',
    tag: 'Admin',
    auth: { merchant: 'Owner', apiKeys: false },
    params: z.object({ id: PathId, userId: PathId }),
    responses: { 200: MerchantUser, 400: null, 403: null, 404: null },
  } as const;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/auth/login',
      tag: 'Merchant users',
      summary: 'Sign in a merchant user',
      description: 'Returns an ES256 JWT (claims sub, mid, role, iss, aud, iat, exp; one hour). A wrong password, an unknown email and an inactive user all answer the same 401. Five consecutive failures for one email from one client lock it for that client like customer login: 429 with Retry-After, even with the right password.',
      auth: { anonymous: true },
      body: MerchantLoginRequest,
      responses: { 200: MerchantSignInResult, 400: null, 401: null, 429: null },
      handler: async ({ body, request }) => {
        const res = await users.LoginMerchantUser({ ...body, client: request.ip }, { deadlineMs: backends.passwordDeadlineMs });
        const { isActive: _active, ...user } = toMerchantUser(present(res.user, 'user'));
        return ok({ token: res.token, expiresAt: res.expiresAt, user });
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/admin/merchants/:id/users',
      tag: 'Admin',
      summary: 'Create a merchant user',
      description: 'The platform admin, or an Owner of the merchant (another role or another merchant: 403; an API key: 401). The email is stored and returned as sent, and unique across all merchant users in any letter case (409).',
      auth: { merchant: 'Owner', apiKeys: false },
      params: z.object({ id: PathId }),
      body: CreateMerchantUserRequest,
      responses: { 201: MerchantUser, 400: null, 403: null, 404: null, 409: null },
      handler: async ({ params, body, principal }) => {
        const scope = await merchantCallScope(access, principal, params.id);
        const user = await users.CreateMerchantUser({ ...body, scope }, { deadlineMs: backends.passwordDeadlineMs });
        return created(toMerchantUser(user), `/api/admin/merchants/${params.id}/users/${user.id}`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/admin/merchants/:id/users',
      tag: 'Admin',
      summary: "List a merchant's users",
      description: 'The platform admin, or an Owner of the merchant (another role or another merchant: 403; an API key: 401). Oldest first, in the paged shape.',
      auth: { merchant: 'Owner', apiKeys: false },
      params: z.object({ id: PathId }),
      query: PageQuery,
      responses: { 200: Paged(MerchantUser), 400: null, 403: null, 404: null },
      handler: async ({ params, query, principal }) => {
        const scope = await merchantCallScope(access, principal, params.id);
        const res = await users.ListMerchantUsers({ scope, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toMerchantUser), res.totalCount, query));
      },
    }),
    defineRoute({
      ...oneUser,
      method: 'GET',
      summary: 'Get a merchant user',
      description: 'Where the Location of a created merchant user points. Another merchant\'s user, or an unknown one, is 404.',
      handler: async ({ params, principal }) => {
        const scope = await merchantCallScope(access, principal, params.id);
        return ok(toMerchantUser(await users.GetMerchantUser({ scope, userId: params.userId })));
      },
    }),
    defineRoute({
      ...oneUser,
      method: 'PATCH',
      summary: 'Activate, deactivate or change the role of a merchant user',
      description: "isActive and role are optional; absent or null leaves that one unchanged. Deactivating an active user, or giving a user another role, ends the user's existing tokens: the next request with one is 401. A change to what the user already has (the same role, isActive true for an active user) changes nothing and leaves the tokens valid. An Owner cannot demote or deactivate the merchant's only active Owner (409); the platform admin can.",
      body: UpdateMerchantUserRequest,
      responses: { ...oneUser.responses, 409: null },
      handler: async ({ params, body, principal }) => {
        const scope = await merchantCallScope(access, principal, params.id);
        const actingUserId = principal.kind === 'merchantUser' ? principal.userId : undefined;
        const user = await users.UpdateMerchantUser({ scope, userId: params.userId, isActive: body.isActive ?? undefined, role: body.role ?? undefined, actingUserId });
        // Only identity knows whether the change did anything: the role sent may be the one the
        // user already has, and then the user's tokens stay valid.
        if (user.tokensRevokedAt) feed.apply({ kind: 'merchant_user', subjectId: user.id, revoked: true, at: user.tokensRevokedAt });
        return ok(toMerchantUser(user));
      },
    }),
  ];
}
