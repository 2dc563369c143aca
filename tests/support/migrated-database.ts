import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, expect } from 'vitest';
import { migrate, type MigrationSource } from '@billing/service-runtime';
import { createTestDatabase, type TestDatabase } from './database.js';

/** What an integration test runs against: a service's schema, migrated, in a database of its own. */
export interface MigratedDatabaseOptions {
  /** Opens the service's ORM on the new database, as the service opens it (pool size, entities). */
  open(url: string): Promise<MikroORM>;
  /** The schema the ORM pins and the migrations own. */
  schema: string;
  migrations: readonly MigrationSource[];
}

/** The suite's database, readable once its `beforeAll` has run. */
export interface MigratedDatabase {
  orm(): MikroORM;
  /** Connection string of the suite's database, for connections outside the ORM. */
  url(): string;
  /** Runs one statement (`?` placeholders) on the ORM's connection, outside any unit of work, and answers its rows. */
  rows<T = Record<string, any>>(sql: string, params?: unknown[]): Promise<T[]>;
  /**
   * The stored row of each entity in `table` (schema-qualified) as Postgres holds it (`to_jsonb`),
   * in the entities' order, with its `id`, `created_at` and `updated_at` checked against the
   * entity that was written (to the millisecond) and then left out, so that rows written at
   * different times compare.
   */
  storedRows(table: string, entities: readonly { id: string; createdAt: Date; updatedAt: Date }[]): Promise<Record<string, unknown>[]>;
}

/**
 * Registers the suite's `beforeAll` (create a test database, open the ORM, migrate the schema)
 * and `afterAll` (close the ORM, drop the database). Call it before the suite's own hooks:
 * they then run after the set-up, and their clean-up before the drop.
 */
export function useMigratedDatabase(options: MigratedDatabaseOptions): MigratedDatabase {
  let db: TestDatabase | undefined;
  let orm: MikroORM | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    orm = await options.open(db.url);
    await migrate(orm, options.schema, options.migrations);
  }, 60_000);
  afterAll(async () => {
    await orm?.close();
    await db?.drop();
  });
  const ready = () => orm ?? notReady();
  const rows = async <T = Record<string, any>>(sql: string, params: unknown[] = []) => (await ready().em.getConnection().execute(sql, params)) as T[];
  return {
    orm: ready,
    url: () => db?.url ?? notReady(),
    rows,
    storedRows: async (table, entities) => {
      const stored = await rows(
        `select to_jsonb(t) as row, (extract(epoch from created_at) * 1000)::bigint as created, (extract(epoch from updated_at) * 1000)::bigint as updated from ${table} t where id in (?)`,
        [entities.map((e) => e.id)],
      );
      expect(stored).toHaveLength(entities.length);
      const byId = new Map(stored.map((r) => [r.row.id as string, r]));
      return entities.map((e) => {
        const r = byId.get(e.id)!;
        expect([Number(r.created), Number(r.updated)]).toEqual([e.createdAt.getTime(), e.updatedAt.getTime()]);
        const { id: _id, created_at: _c, updated_at: _u, ...rest } = r.row as Record<string, unknown>;
        return rest;
      });
    },
  };
}

function notReady(): never {
  throw new Error('the test database is not set up yet: read it in a test or a hook, not while the file loads');
}
