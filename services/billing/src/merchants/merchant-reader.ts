import type { MikroORM } from '@mikro-orm/postgresql';
import { Batcher } from '@billing/service-runtime';
import { Merchant } from './merchant.js';

/**
 * Reads merchants by id, coalescing the reads that arrive together into one
 * `select ... where id in (...)`. Every Merchants/me and every merchant-scope check reads a
 * merchant; a round trip to Postgres costs far more than the query, so under load one statement
 * serves many requests (each still reads the current row).
 */
export class MerchantReader {
  private readonly batcher: Batcher<string, Merchant | null>;

  constructor(orm: MikroORM) {
    this.batcher = new Batcher(async (ids) => {
      const em = orm.em.fork();
      const unique = [...new Set(ids)];
      const rows: Record<string, unknown>[] = await em.getConnection().execute(`select * from merchants where id in (${unique.map(() => '?').join(', ')})`, unique);
      const found = new Map(rows.map((r) => [String(r.id), em.map(Merchant, r)]));
      return ids.map((id) => found.get(id) ?? null);
    });
  }

  load(id: string): Promise<Merchant | null> {
    return this.batcher.submit(id.toLowerCase());
  }
}
