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

/** The same database opened with DB_RANDOM_PAGE_COST=4 (Postgres's own default). */
let spinning: MikroORM;
/** The same database with DB_RANDOM_PAGE_COST=0: the server's own setting. */
let server: MikroORM;

beforeAll(async () => {
  spinning = await openDatabase({ url: url(), schema: SCHEMA, entities: [], randomPageCost: 4 });
  server = await openDatabase({ url: url(), schema: SCHEMA, entities: [] });
});

afterAll(async () => {
  await spinning?.close();
  await server?.close();
});

const setting = async (db: MikroORM, name: string) => (await queryPrepared<{ value: string }>(db, undefined, `select current_setting($1) as value`, [name])).rows[0]!.value;

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
});
