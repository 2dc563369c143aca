import { beforeAll, describe, expect, it } from 'vitest';
import { useMigratedDatabase } from '../../../tests/support/migrated-database.js';
import { numberedParameters, openDatabase, queryRows, transactPrepared } from './database.js';

/**
 * `queryRows` runs the same `?` SQL in an ORM transaction and on a `transactPrepared`
 * connection (where the billing engine records provider answers), with the same rows and the
 * same transaction semantics.
 */
const SCHEMA = 'queryrows';
// No migrations: the schema alone, and the suite's table made below.
const { orm } = useMigratedDatabase({ open: (url) => openDatabase({ url, schema: SCHEMA, entities: [] }), schema: SCHEMA, migrations: [] });

beforeAll(async () => {
  await orm().em.getConnection().execute(`create table "${SCHEMA}".t (id int primary key, note text, at timestamptz)`);
});

const insert = `insert into t (id, note, at) select r.id, r.note, ?::timestamptz from jsonb_to_recordset(?::jsonb) as r(id int, note text) returning id`;

describe('queryRows', () => {
  it('numbers ? parameters outside quoted strings and identifiers, and counts them', () => {
    expect(numberedParameters(`select ?::int, '?' as "a?b", ?`, 2)).toBe(`select $1::int, '?' as "a?b", $2`);
    expect(() => numberedParameters('select ?', 2)).toThrow(/1 parameters, given 2/);
  });

  it('gives the same rows through an EntityManager and through a transactPrepared connection', async () => {
    const at = new Date('2026-11-23T10:00:00.000Z');
    const viaOrm = await orm().em.fork().transactional((em) => queryRows<{ id: number }>(em, insert, [at, JSON.stringify([{ id: 1, note: "it's ?" }])]));
    const viaConnection = await transactPrepared(orm(), (query) => queryRows<{ id: number }>(query, insert, [at, JSON.stringify([{ id: 2, note: 'two' }])]));
    expect(viaOrm).toEqual([{ id: 1 }]);
    expect(viaConnection).toEqual([{ id: 2 }]);
    // Both run on connections of the ORM's pool, so values come back alike (timestamps as the
    // pool's driver gives them: text, which the row mappers parse).
    const read = 'select id, note, at from t where id = any(?::int[]) order by id';
    const rows = await transactPrepared(orm(), (query) => queryRows<{ id: number; note: string; at: string }>(query, read, [[1, 2]]));
    expect(rows.map((r) => ({ ...r, at: new Date(r.at) }))).toEqual([
      { id: 1, note: "it's ?", at },
      { id: 2, note: 'two', at },
    ]);
    expect(await orm().em.fork().transactional((em) => queryRows(em, read, [[1, 2]]))).toEqual(rows);
  });

  it('rolls a transactPrepared transaction back when its work throws', async () => {
    await expect(
      transactPrepared(orm(), async (query) => {
        await queryRows(query, insert, [new Date(), JSON.stringify([{ id: 3, note: 'rolled back' }])]);
        throw new Error('after the insert');
      }),
    ).rejects.toThrow('after the insert');
    expect(await queryRows(orm().em.fork(), 'select id from t where id = ?', [3])).toEqual([]);
  });
});
