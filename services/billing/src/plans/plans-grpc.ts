import { Batcher, requireMerchantScope, requireScope, type ServiceImpl } from '@billing/service-runtime';
import { type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText, pageWindow } from '@billing/contracts';
import { Plan } from './plan.js';
import { loadPlans, PlanStore } from './plan-store.js';

export function plansGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Plans'> {
  const store = new PlanStore(orm);
  /** Reads that arrive together share one `select ... where id in (...)`; each still reads the current row. */
  const reads = new Batcher<string, Plan | undefined>(async (ids) => {
    const found = await loadPlans(orm, ids);
    return ids.map((id) => found.get(id));
  });

  return {
    CreatePlan: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const { productId, name, currency, interval, intervalCount, trialDays, isActive } = req;
      return (await store.create({ merchantId, productId, name, amountMinor: Number(req.amountMinor), currency, interval, intervalCount, trialDays, isActive })).toMessage();
    },

    GetPlan: async (req) => {
      // As `findScoped` answers: a malformed id is `Not found.`, another merchant's plan is missing.
      const scope = requireScope(req.scope);
      if (!isUuidText(req.id)) throw new DomainError('not_found', 'Not found.');
      const plan = await reads.submit(req.id.toLowerCase());
      if (!plan || (scope.kind === 'merchant' && plan.merchantId !== scope.merchantId)) throw new DomainError('not_found', 'Plan not found.');
      return plan.toMessage();
    },

    ListPlans: async (req) => {
      const where: Record<string, unknown> = { merchantId: requireMerchantScope(req.scope) };
      if (req.productId) where.productId = req.productId.toLowerCase();
      if (req.isActive !== undefined) where.isActive = req.isActive;
      const [items, total] = await orm.em.fork().findAndCount(Plan, where, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((p) => p.toMessage()), totalCount: total };
    },

    UpdatePlan: async (req) => (await store.update({ scope: requireScope(req.scope), id: req.id, name: req.name, isActive: req.isActive })).toMessage(),
  };
}
