import { ForeignKeyConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { Batcher, queryPrepared, typedDatabaseError } from '@billing/service-runtime';
import type { Product } from './product.js';

/** A product as a row of `products` (instants in ISO 8601, which keeps their milliseconds). */
function productRow(p: Product) {
  return { id: p.id, merchant_id: p.merchantId, name: p.name, description: p.description, created_at: p.createdAt.toISOString(), updated_at: p.updatedAt.toISOString() };
}

/**
 * Create-product, group-committed: the products created together are one prepared statement with
 * the batch as one JSON parameter, committed on its own (no BEGIN/COMMIT), where the ORM's unit of
 * work spent a transaction and its metadata walk per batch. A product of a merchant that does not
 * exist fails the statement on the foreign key; its batch then runs again one by one (`Batcher`),
 * so only that create answers `merchant_not_found`.
 */
export function productCreation(orm: MikroORM): (product: Product) => Promise<void> {
  const inserts = new Batcher<Product, void>(async (products) => {
    await queryPrepared(
      orm,
      'product_insert_batch',
      `insert into products (id, merchant_id, name, description, created_at, updated_at)
       select id, merchant_id, name, description, created_at, updated_at
         from jsonb_to_recordset($1::jsonb) as p(id uuid, merchant_id uuid, name text, description text, created_at timestamptz, updated_at timestamptz)`,
      [JSON.stringify(products.map(productRow))],
    );
    return products.map(() => undefined);
  });
  return async (product) => {
    try {
      await inserts.submit(product);
    } catch (e) {
      if (typedDatabaseError(orm, e) instanceof ForeignKeyConstraintViolationException) throw new DomainError('merchant_not_found', 'Merchant not found.');
      throw e;
    }
  };
}
