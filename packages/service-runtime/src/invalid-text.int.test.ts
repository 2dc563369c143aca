import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { invalidTextError, openDatabase } from './database.js';

/**
 * Regression for: a NUL that reached Postgres answered 500 (burning the caller's
 * Idempotency-Key) and its message, quoting the SQL's bound values, was logged. The backstop
 * turns the real driver errors into a 400 that names no value.
 */
const SCHEMA = 'texttest';
let db: TestDatabase;
let orm: MikroORM;

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openDatabase({ url: db.url, schema: SCHEMA, entities: [] });
  await orm.em.getConnection().execute(`create schema "${SCHEMA}"; create table "${SCHEMA}".t (v text, j jsonb)`);
}, 60_000);

afterAll(async () => {
  await orm?.close();
  await db?.drop();
});

async function errorOf(sql: string, params: unknown[]): Promise<unknown> {
  try {
    await orm.em.fork().getConnection().execute(sql, params);
  } catch (e) {
    return e;
  }
  throw new Error('the statement was accepted');
}

describe('text Postgres refuses is a bad request, not an internal error', () => {
  it('a NUL in a value MikroORM inlines into the statement (08P01), and the connection stays usable', async () => {
    const e = await errorOf(`insert into "${SCHEMA}".t (v) values (?)`, ['secret-value\u0000x']);
    expect(invalidTextError(e)?.code).toBe('bad_request');
    expect(await orm.em.fork().getConnection().execute('select 1 as one')).toEqual([{ one: 1 }]);
  });

  it('a NUL in a bound text parameter (22021)', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const e = await client.query('select $1::text', ['secret-value\u0000x']).then(() => undefined, (err: unknown) => err);
    await client.end();
    const mapped = invalidTextError(e);
    expect(mapped).toBeInstanceOf(DomainError);
    expect(mapped!.code).toBe('bad_request');
    expect(mapped!.message).not.toContain('secret-value');
  });

  it('a \\u0000 escape in a jsonb parameter (22P05)', async () => {
    const e = await errorOf(`insert into "${SCHEMA}".t (j) values (?::jsonb)`, ['{"a":"secret-value\\u0000"}']);
    expect(invalidTextError(e)?.code).toBe('bad_request');
  });

  it('other database errors are left alone', async () => {
    expect(invalidTextError(await errorOf('select * from no_such_table', []))).toBeUndefined();
  });
});
