import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useMigratedDatabase } from '../../../tests/support/migrated-database.js';
import { openDatabase, queryPrepared } from './database.js';

/**
 * What every pooled connection is set up with: the service's schema first on the search path,
 * and the planner's `random_page_cost` as the service is configured (DB_RANDOM_PAGE_COST).
 */
const SCHEMA = 'dbsession';
const { orm, url } = useMigratedDatabase({ open: (u) => openDatabase({ url: u, schema: SCHEMA, entities: [], randomPageCost: 1.1 }), schema: SCHEMA, migrations: [] });

/** The same database opened as a deployment that keeps Postgres's default price of a page read by key (4). */
let spinning: MikroORM;
/** The same database with DB_RANDOM_PAGE_COST=0: the server's own setting. */
let server: MikroORM;

beforeAll(async () => {
  spinning = await openDatabase({ url: url(), schema: SCHEMA, entities: [], randomPageCost: 4 });
  server = await openDatabase({ url: url(), schema: SCHEMA, entities: [] });
  // A table shaped like a merchant's products: a few thousand rows of a few dozen bytes.
  await orm().em.getConnection().execute(`create table "${SCHEMA}".items (id uuid primary key, merchant_id uuid not null, name text not null)`);
  await orm().em.getConnection().execute(`insert into "${SCHEMA}".items select gen_random_uuid(), gen_random_uuid(), 'Product ' || g from generate_series(1, 4800) g`);
  await orm().em.getConnection().execute(`analyze "${SCHEMA}".items`);
});

afterAll(async () => {
  await spinning?.close();
  await server?.close();
});

const setting = async (db: MikroORM, name: string) => (await queryPrepared<{ value: string }>(db, undefined, `select current_setting($1) as value`, [name])).rows[0]!.value;

/** The scan node of the plan of a lookup of 35 rows by key, as planned on a connection of `db`'s pool. */
async function lookupScan(db: MikroORM): Promise<string> {
  const ids = (await queryPrepared<{ id: string }>(db, undefined, `select id from items order by id limit 35 offset 1000`, [])).rows.map((r) => r.id);
  // The ids written into the statement, as a custom plan sees them.
  const literal = `'{${ids.join(',')}}'::uuid[]`;
  const { rows } = await queryPrepared<{ 'QUERY PLAN': [{ Plan: { 'Node Type': string; Plans?: { 'Node Type': string }[] } }] }>(
    db,
    undefined,
    `explain (format json) select id, merchant_id from items where id = any(${literal}) order by id`,
    [],
  );
  const top = rows[0]!['QUERY PLAN'][0].Plan;
  return top['Node Type'] === 'Sort' ? top.Plans![0]!['Node Type'] : top['Node Type'];
}

describe('pooled connections', () => {
  it("put the service's schema first on the search path", async () => {
    expect(await setting(orm(), 'search_path')).toBe(`${SCHEMA}, public`);
  });

  it('price a page read by key at DB_RANDOM_PAGE_COST, or leave the server its own with 0', async () => {
    expect(await setting(orm(), 'random_page_cost')).toBe('1.1');
    expect(await setting(spinning, 'random_page_cost')).toBe('4');
    const { rows } = await queryPrepared<{ value: string }>(server, undefined, `select reset_val as value from pg_settings where name = 'random_page_cost'`, []);
    expect(await setting(server, 'random_page_cost')).toBe(rows[0]!.value);
  });

  it('look a few dozen rows up by key on the index at 1.1, where the default price of 4 makes it a scan of the whole table', async () => {
    expect(await lookupScan(spinning)).toBe('Seq Scan');
    expect(['Index Scan', 'Bitmap Heap Scan', 'Index Only Scan']).toContain(await lookupScan(orm()));
  });
});
