import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { BillingConfig } from '../config.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import { Product } from './product.js';
import { productCreation } from './product-store.js';

// Create-product's hand-written SQL against a real Postgres: the rows it writes against what the
// ORM wrote for the same products, and a missing merchant failing only its own create.

const { orm, storedRows: storedRowsOf } = useMigratedDatabase({
  open: (url) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url, DB_POOL_MAX: '25' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

async function merchant(): Promise<string> {
  const m = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  await orm().em.fork().persistAndFlush(m);
  return m.id;
}

/** Products with every column varied: a description or none, names that need escaping in JSON. */
function newProducts(merchantId: string): Product[] {
  return [
    Product.create({ merchantId, name: 'Membership' }),
    Product.create({ merchantId, name: `Zoë's "gym" 🏋 \\ {"x":1}`, description: 'Line one\nline "two"\ttabbed' }),
    Product.create({ merchantId, name: ' Classes ', description: null }),
  ];
}

describe('productCreation', () => {
  it('writes, for creates arriving together, the products rows the ORM wrote for the same products', async () => {
    const merchantId = await merchant();
    const byOrm = newProducts(merchantId);
    await orm().em.fork().transactional(async (em) => byOrm.forEach((p) => em.persist(p)));

    const byStore = newProducts(merchantId);
    const create = productCreation(orm());
    await Promise.all(byStore.map((p) => create(p)));
    expect(await storedRowsOf('billing.products', byStore)).toEqual(await storedRowsOf('billing.products', byOrm));
    // And the ORM loads each as it was created.
    const loaded = await orm().em.fork().find(Product, { id: { $in: byStore.map((p) => p.id) } });
    expect(new Map(loaded.map((p) => [p.id, { ...p }]))).toEqual(new Map(byStore.map((p) => [p.id, { ...p }])));
  });

  it("answers merchant_not_found for a missing merchant's product and commits the products created beside it", async () => {
    const merchantId = await merchant();
    const create = productCreation(orm());
    const [a, b] = newProducts(merchantId);
    const orphan = Product.create({ merchantId: randomUUID(), name: 'Nobody sells this' });
    const results = await Promise.allSettled([create(a!), create(orphan), create(b!)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const refused = (results[1] as PromiseRejectedResult).reason;
    expect(refused).toBeInstanceOf(DomainError);
    expect((refused as DomainError).code).toBe('merchant_not_found');
    const stored = await orm().em.fork().find(Product, { id: { $in: [a!.id, orphan.id, b!.id] } });
    expect(stored.map((p) => p.id).sort()).toEqual([a!.id, b!.id].sort());
  });
});
