import { GroupWrite, requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { ForeignKeyConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateProductRequest, DomainError, pageWindow, parseOrThrow } from '@billing/contracts';
import { findScoped } from '../merchant-scope.js';
import { Product } from './product.js';

/** A product addressed by id: another merchant's product is indistinguishable from a missing one. */
export function findProduct(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Product> {
  return findScoped(em, Product, scope, id, 'Product', opts);
}

export function productsGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Products'> {
  /** Group-committed: the creates that arrive together are one multi-row insert. */
  const creates = new GroupWrite(orm, {
    load: async () => undefined,
    apply: (em: EntityManager, product: Product) => {
      em.persist(product);
      return product.toMessage();
    },
  });
  return {
    CreateProduct: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(CreateProductRequest, { ...req, merchantId });
      const product = Product.create({ ...input, merchantId });
      try {
        return await creates.run(product);
      } catch (e) {
        if (e instanceof ForeignKeyConstraintViolationException) throw new DomainError('merchant_not_found', 'Merchant not found.');
        throw e;
      }
    },

    GetProduct: async (req) => (await findProduct(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListProducts: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const [items, total] = await orm.em.fork().findAndCount(Product, { merchantId }, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((p) => p.toMessage()), totalCount: total };
    },
  };
}
