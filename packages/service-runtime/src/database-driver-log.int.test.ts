import { Writable } from 'node:stream';
import type { MikroORM } from '@mikro-orm/postgresql';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { openDatabase } from './database.js';

/**
 * The query builder under the ORM (knex) reports a pooled connection that died (Postgres
 * restarted, a proxy dropped it) with `console.log('Connection Error: …')`: a bare line among
 * the JSON ones, with no level, service or time, that log pipelines cannot parse. It goes
 * through the service's logger instead.
 */
let db: TestDatabase;
let orm: MikroORM | undefined;
const lines: Record<string, unknown>[] = [];
const logger = pino({ name: 'test', level: 'debug' }, new Writable({ write: (chunk, _enc, done) => void (lines.push(JSON.parse(String(chunk))), done()) }));

beforeAll(async () => {
  db = await createTestDatabase();
}, 60_000);

afterAll(async () => {
  await orm?.close().catch(() => undefined);
  await db?.drop();
});

describe("a pooled connection the server ended", () => {
  it("is reported through the service's logger, never as a bare console line", async () => {
    const consoleLines: unknown[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((...args) => void consoleLines.push(args));
    try {
      orm = await openDatabase({ url: db.url, schema: 'public', entities: [], poolMax: 1, logger });
      const conn = orm.em.fork().getConnection();
      const [{ pid }] = await conn.execute<{ pid: number }[]>('select pg_backend_pid() as pid');
      // Ended from another session, as a restarting server or a dropped proxy ends it.
      const other = await openDatabase({ url: db.url, schema: 'public', entities: [], poolMax: 1 });
      await other.em.fork().getConnection().execute(`select pg_terminate_backend(${Number(pid)})`);
      await other.close();
      await new Promise((r) => setTimeout(r, 200));
      await conn.execute('select 1').catch(() => undefined);
      await conn.execute('select 1');
    } finally {
      spy.mockRestore();
    }
    expect(consoleLines).toEqual([]);
    expect(lines.some((l) => l.component === 'knex' && l.level === 40 && String(l.msg).includes('Connection Error'))).toBe(true);
  });
});
