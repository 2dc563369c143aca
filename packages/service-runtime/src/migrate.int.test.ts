import type { MikroORM } from '@mikro-orm/postgresql';
import { Migration } from '@mikro-orm/migrations';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { migrate, openDatabase, type MigrationSource } from './database.js';

const SCHEMA = 'migratetest';
let db: TestDatabase;
let orm: MikroORM;

class CreateT extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "${SCHEMA}".t (id int primary key)`);
  }
}
class AddV extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "${SCHEMA}".t add column v text`);
  }
}

/** Sources that record which classes were imported. */
function sources(list: [string, typeof Migration][], loaded: string[]): MigrationSource[] {
  return list.map(([name, cls]) => ({ name, load: async () => (loaded.push(name), cls) }));
}

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openDatabase({ url: db.url, schema: SCHEMA, entities: [] });
}, 60_000);

afterAll(async () => {
  await orm?.close();
  await db?.drop();
});

describe('migrate', () => {
  it('applies pending migrations in order, and imports no migration class once the schema is up to date', async () => {
    const first: string[] = [];
    expect(await migrate(orm, SCHEMA, sources([['M1_create_t', CreateT]], first))).toEqual(['M1_create_t']);
    expect(first).toEqual(['M1_create_t']);

    const upToDate: string[] = [];
    expect(await migrate(orm, SCHEMA, sources([['M1_create_t', CreateT]], upToDate))).toEqual([]);
    expect(upToDate).toEqual([]);

    const next: string[] = [];
    expect(await migrate(orm, SCHEMA, sources([['M1_create_t', CreateT], ['M2_add_v', AddV]], next))).toEqual(['M2_add_v']);
    const columns = await orm.em.getConnection().execute(`select column_name from information_schema.columns where table_schema = ? and table_name = 't' order by ordinal_position`, [SCHEMA]);
    expect(columns.map((c: { column_name: string }) => c.column_name)).toEqual(['id', 'v']);
  });

  // Replicas starting together on an empty schema, each with its own pool: the per-schema lock
  // makes one apply the migration and the other find nothing pending. It used to be taken on a
  // pooled connection outside the transaction (released at once), and `create schema` raced too.
  it('applies a migration once when two processes migrate the same schema at the same moment', async () => {
    const schema = 'migrateconc';
    class CreateU extends Migration {
      override async up(): Promise<void> {
        this.addSql(`select pg_sleep(0.3)`);
        this.addSql(`create table "${schema}".u (id int primary key)`);
      }
    }
    const replicas = [await openDatabase({ url: db.url, schema, entities: [] }), await openDatabase({ url: db.url, schema, entities: [] })];
    try {
      const results = await Promise.all(replicas.map((r) => migrate(r, schema, sources([['M1_create_u', CreateU]], []))));
      expect(results.map((r) => r.join()).sort()).toEqual(['', 'M1_create_u']);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
    }
  });
});
