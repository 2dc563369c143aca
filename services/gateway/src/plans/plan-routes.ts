import { z } from 'zod';
import { CreatePlanRequest, ListPlansQuery, Paged, PathId, Plan, PLAN_INTERVALS, toPage, UpdatePlanRequest, Uuid } from '@billing/contracts';
import { toMajorUnits, toMinorUnits } from '@billing/money';
import type { MerchantAccess } from '../auth/access.js';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { assertSameId, oneOf } from '../http/views.js';
import type { Plan__Output } from '@billing/proto-types/billing/v1/Plan';

/** Plan message → REST: minor units (an int64 decoded as a string) become a decimal amount, once, here. */
export function toPlan(p: Plan__Output): Plan {
  return {
    id: p.id,
    merchantId: p.merchantId,
    productId: p.productId,
    name: p.name,
    amount: toMajorUnits(Number(p.amountMinor), p.currency),
    currency: p.currency,
    interval: oneOf(PLAN_INTERVALS, p.interval, 'interval'),
    intervalCount: p.intervalCount,
    trialDays: p.trialDays,
    isActive: p.isActive,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
  };
}

const IdParams = z.object({ id: PathId });

export function planRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const plans = backends.billing.plans;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Plans',
      tag: 'Plans',
      summary: 'Create a plan for a product',
      description:
        '`amount` is a decimal in major units (19.95 or "19.95") with at most as many decimals as the currency has (2 for AUD; 19.951 is 400, never rounded); it must be positive. interval: Week | Fortnight | Month | Year. Optional, each taking its default when absent or null: currency (AUD), intervalCount 1..52 (1), trialDays 0..365 (0), isActive (true). The product must be the merchant\'s (404 otherwise).',
      auth: { merchant: 'Admin' },
      body: CreatePlanRequest,
      responses: { 201: Plan, 400: null, 403: null, 404: null },
      handler: async ({ body, principal }) => {
        const scope = await merchantCallScope(access, principal, body.merchantId);
        const plan = toPlan(
          await plans.CreatePlan({
            scope,
            productId: body.productId,
            name: body.name,
            amountMinor: toMinorUnits(body.amount, body.currency),
            currency: body.currency,
            interval: body.interval,
            intervalCount: body.intervalCount,
            trialDays: body.trialDays,
            isActive: body.isActive,
          }),
        );
        return created(plan, `/api/Plans/${plan.id}`);
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/Plans/:id',
      tag: 'Plans',
      summary: "Rename a plan or change whether it is active",
      description: 'Absent or null fields are unchanged. Price and schedule cannot change: naming productId, amount, currency, interval, intervalCount or trialDays is 400 (create a new plan instead). Deactivating a plan leaves existing subscriptions running; new enrolments are 422.',
      auth: { merchant: 'Admin' },
      params: IdParams,
      body: UpdatePlanRequest,
      responses: { 200: Plan, 400: null, 403: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const scope = await callScope(access, principal, body.merchantId);
        return ok(toPlan(await plans.UpdatePlan({ scope, id: params.id, name: body.name ?? undefined, isActive: body.isActive ?? undefined })));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Plans',
      tag: 'Plans',
      summary: "List a merchant's plans",
      description: 'Oldest first; optional filters productId and isActive (true|false).',
      auth: { merchant: 'Viewer' },
      query: ListPlansQuery,
      responses: { 200: Paged(Plan), 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await plans.ListPlans({ scope, productId: query.productId, isActive: query.isActive, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toPlan), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Plans/:id',
      tag: 'Plans',
      summary: 'Read a plan',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: Plan, 404: null },
      handler: async ({ params, principal }) => ok(toPlan(await plans.GetPlan({ scope: await callScope(access, principal), id: params.id }))),
    }),
  ];
}
