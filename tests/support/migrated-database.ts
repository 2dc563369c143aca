import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll } from 'vitest';
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
  return {
    orm: ready,
    url: () => db?.url ?? notReady(),
    rows: async <T>(sql: string, params: unknown[] = []) => (await ready().em.getConnection().execute(sql, params)) as T[],
  };
}

function notReady(): never {
  throw new Error('the test database is not set up yet: read it in a test or a hook, not while the file loads');
}
