import type { MikroORM } from '@mikro-orm/postgresql';
import { Merchant } from './merchant.js';

interface Waiter {
  resolve: (m: Merchant | null) => void;
  reject: (e: unknown) => void;
}

/**
 * Reads merchants by id, coalescing the reads that arrive in the same event-loop turn into one
 * `select ... where id in (...)`. Every Merchants/me and every merchant-scope check reads a
 * merchant; on this platform a round trip to Postgres costs far more than the query, so under
 * load one statement serves many requests (each still reads the current row).
 */
export class MerchantReader {
  private pending = new Map<string, Waiter[]>();

  constructor(private readonly orm: MikroORM) {}

  load(id: string): Promise<Merchant | null> {
    const key = id.toLowerCase();
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) setImmediate(() => void this.flush());
      const waiters = this.pending.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else this.pending.set(key, [{ resolve, reject }]);
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    const ids = [...batch.keys()];
    try {
      const em = this.orm.em.fork();
      const rows: Record<string, unknown>[] = await em.getConnection().execute(`select * from merchants where id in (${ids.map(() => '?').join(', ')})`, ids);
      const found = new Map(rows.map((r) => [String(r.id), em.map(Merchant, r)]));
      for (const [id, waiters] of batch) for (const w of waiters) w.resolve(found.get(id) ?? null);
    } catch (e) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(e);
    }
  }
}
