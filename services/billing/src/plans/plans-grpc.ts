import { requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { pageWindow } from '@billing/contracts';
import { findScoped } from '../merchant-scope.js';
import { findProduct } from '../products/products-grpc.js';
import { Plan } from './plan.js';

/** A plan addressed by id: another merchant's plan is indistinguishable from a missing one. */
export function findPlan(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Plan> {
  return findScoped(em, Plan, scope, id, 'Plan', opts);
}

export function plansGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Plans'> {
  return {
    CreatePlan: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const em = orm.em.fork();
      const product = await findProduct(em, { kind: 'merchant', merchantId }, req.productId);
      const plan = Plan.create({ ...req, merchantId: product.merchantId, productId: product.id, amountMinor: Number(req.amountMinor) });
      await em.persistAndFlush(plan);
      return plan.toMessage();
    },

    GetPlan: async (req) => (await findPlan(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListPlans: async (req) => {
      const where: Record<string, unknown> = { merchantId: requireMerchantScope(req.scope) };
      if (req.productId) where.productId = req.productId.toLowerCase();
      if (req.isActive !== undefined) where.isActive = req.isActive;
      const [items, total] = await orm.em.fork().findAndCount(Plan, where, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((p) => p.toMessage()), totalCount: total };
    },

    UpdatePlan: async (req) => {
      const scope = requireScope(req.scope);
      return orm.em.fork().transactional(async (em) => {
        const plan = await findPlan(em, scope, req.id, { lock: true });
        plan.update({ name: req.name, isActive: req.isActive });
        return plan.toMessage();
      });
    },
  };
}
