import { randomBytes } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, onServer, type TestDatabase } from '../../../tests/support/database.js';
import { databaseUnavailableError, invalidTextError, openDatabase } from './database.js';

/**
 * A database that cannot serve now (here: a role at its connection limit, as a server whose
 * connection slots are all taken answers) is the caller's 503 to retry, not a 500: the real
 * driver errors, through the ORM's pool and node-postgres alone.
 */
let db: TestDatabase;
const role = `bp_limited_${randomBytes(4).toString('hex')}`;
const password = randomBytes(12).toString('hex');
let limitedUrl: string;

const asServer = (sql: string) => onServer(process.env.DATABASE_URL!, (client) => client.query(sql));

beforeAll(async () => {
  db = await createTestDatabase();
  // A role that may open no connection at all: every connect fails with 53300 too_many_connections.
  await asServer(`create role ${role} login password '${password}' connection limit 0`);
  const url = new URL(db.url);
  url.username = role;
  url.password = password;
  limitedUrl = url.toString();
}, 60_000);

afterAll(async () => {
  await db?.drop();
  await asServer(`drop role if exists ${role}`).catch(() => undefined);
});

const errorOf = async (fn: () => Promise<unknown>): Promise<unknown> => {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('it succeeded');
};

describe('a database at its connection limit', () => {
  it('is service_unavailable with a retry hint through the ORM\'s pool, and names no statement', async () => {
    let orm: MikroORM | undefined;
    const e = await errorOf(async () => {
      orm = await openDatabase({ url: limitedUrl, schema: 'public', entities: [], poolMax: 1 });
      await orm.em.fork().getConnection().execute('select 1');
    });
    await orm?.close().catch(() => undefined);
    expect((e as { code?: string }).code).toBe('53300');
    const answer = databaseUnavailableError(e);
    expect(answer).toMatchObject({ code: 'service_unavailable', extensions: { retryAfterSeconds: 1 } });
    expect(answer!.message).not.toContain('select');
    expect(invalidTextError(e)).toBeUndefined();
  });

  it('is service_unavailable from node-postgres alone, and a refused connection too', async () => {
    const client = new pg.Client({ connectionString: limitedUrl });
    expect(databaseUnavailableError(await errorOf(() => client.connect()))?.code).toBe('service_unavailable');
    const refused = new pg.Client({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    expect(databaseUnavailableError(await errorOf(() => refused.connect()))?.code).toBe('service_unavailable');
  });

  it('leaves the errors of a statement that was wrong alone', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      for (const sql of ['select * from no_such_table', 'select 1/0', 'selec 1']) {
        expect(databaseUnavailableError(await errorOf(() => client.query(sql)))).toBeUndefined();
      }
    } finally {
      await client.end();
    }
  });
});
