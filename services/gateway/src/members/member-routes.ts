import { z } from 'zod';
import { CreateMemberRequest, ListMemberAnswersQuery, ListMembersQuery, Member, MemberAnswer, Paged, PathId, toPage, Uuid } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { orNull, present } from '../http/views.js';
import type { Member__Output } from '@billing/proto-types/billing/v1/Member';

export function toMember(m: Member__Output): Member {
  return {
    id: m.id,
    merchantId: m.merchantId,
    email: m.email,
    firstName: m.firstName,
    lastName: m.lastName,
    phone: orNull(m.phone),
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}

const IdParams = z.object({ id: PathId });

export function memberRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const members = backends.billing.members;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Members',
      tag: 'Members',
      summary: 'Create a member, or return the existing member with that email',
      description:
        'Members are unique per merchant by email, compared case-insensitively. A new member is 201 with Location and emits member.created; an existing one is returned unchanged with 200 (the other fields of the request are ignored). Concurrent creates with one email yield one member. Does not take an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      body: CreateMemberRequest,
      responses: { 200: Member, 201: Member, 400: null, 403: null, 404: null },
      handler: async ({ body, principal }) => {
        const scope = await merchantCallScope(access, principal, body.merchantId);
        const res = await members.CreateMember({ ...body, scope, phone: body.phone ?? undefined });
        const member = toMember(present(res.member, 'member'));
        return res.created ? created(member, `/api/Members/${member.id}`) : ok(member);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Members',
      tag: 'Members',
      summary: "List a merchant's members",
      description: 'Oldest first. `email` filters by exact email, case-insensitively.',
      auth: { merchant: 'Viewer' },
      query: ListMembersQuery,
      responses: { 200: Paged(Member), 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await members.ListMembers({ scope, email: query.email || undefined, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toMember), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Members/:id',
      tag: 'Members',
      summary: 'Read a member',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: Member, 404: null },
      handler: async ({ params, principal }) => ok(toMember(await members.GetMember({ scope: await callScope(access, principal), id: params.id }))),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/members/:memberId/answers',
      tag: 'Members',
      summary: "Read a member's answers to onboarding questions",
      description:
        "What the member answered to the questions of a plan's product when completing an onboarding invitation or a hosted checkout that asked them, as last saved there: one item per answered question, in the questions' display order; a question left unanswered has no item. `productId` limits them to that product's questions (none: an empty page). A member of another merchant, or none, is 404.",
      auth: { merchant: 'Viewer' },
      params: z.object({ memberId: PathId }),
      query: ListMemberAnswersQuery,
      responses: { 200: Paged(MemberAnswer), 404: null },
      handler: async ({ params, query, principal }) => {
        const res = await backends.billing.answers.ListMemberAnswers({ scope: await callScope(access, principal), memberId: params.memberId, productId: query.productId });
        const all: MemberAnswer[] = res.items.map((a) => ({ questionId: a.questionId, textValue: a.textValue ?? null, optionIds: a.optionIds }));
        const from = (query.page - 1) * query.pageSize;
        return ok(toPage(all.slice(from, from + query.pageSize), all.length, query));
      },
    }),
  ];
}
