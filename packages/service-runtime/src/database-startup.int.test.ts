import net from 'node:net';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { openDatabase } from './database.js';

/**
 * A service started before its database (docker-compose, a host rebooting) waits for it: the
 * connection is retried while the server refuses, and the ORM comes up once it listens. Here
 * the "server" is a TCP proxy to the real Postgres that starts listening a second late.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

it('retries a refused connection until the server listens, then opens the database', async () => {
  const target = new URL(db.url);
  const port = await freePort();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  const late = setTimeout(() => proxy.listen(port, '127.0.0.1'), 1_000);
  const url = new URL(db.url);
  url.host = `127.0.0.1:${port}`;
  const warnings: unknown[] = [];
  const logger = { warn: (o: unknown) => warnings.push(o) } as never;
  const started = Date.now();
  const orm = await openDatabase({ url: url.toString(), schema: 'public', entities: [], poolMax: 1, startupWaitMs: 20_000, logger });
  try {
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(await orm.em.fork().getConnection().execute('select 1 as one')).toEqual([{ one: 1 }]);
    expect(warnings.length).toBeGreaterThan(0);
    expect(warnings[0]).toMatchObject({ server: `127.0.0.1:${port}${url.pathname}`, reason: 'ECONNREFUSED', attempt: 1 });
    expect(JSON.stringify(warnings)).not.toContain(url.username || 'postgres@');
  } finally {
    clearTimeout(late);
    await orm.close();
    proxy.close();
  }
}, 30_000);

/** Opens the database at `url` as a service starts, expecting exit 78; answers what it wrote to stderr. */
async function startupExiting78(url: URL): Promise<string[]> {
  const written: string[] = [];
  const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (written.push(String(chunk)), true));
  const exit = vi.spyOn(process, 'exit').mockImplementation((code) => {
    throw new Error(`exit ${code}`);
  });
  try {
    await expect(openDatabase({ url: url.toString(), schema: 'public', entities: [], poolMax: 1, startupWaitMs: 20_000 })).rejects.toThrow('exit 78');
  } finally {
    write.mockRestore();
    exit.mockRestore();
  }
  return written;
}

/**
 * A login Postgres refuses (a role that does not exist: 28000 under trust auth, 28P01 under
 * password auth) is a configuration error: not waited for, and said in one line naming the
 * server and what to fix (never the user or the password), with exit status 78 like every other
 * configuration error; it used to end the start-up in the driver's uncaught stack trace.
 */
it('refuses a login Postgres refuses at once, in one line, and exits 78', async () => {
  const url = new URL(db.url);
  url.username = 'bp_no_such_role';
  url.password = 's3cret-pw';
  const started = Date.now();
  const written = await startupExiting78(url);
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(written).toHaveLength(1);
  expect(written[0]).toMatch(/refused the login .*SQLSTATE 28/);
  expect(written[0]).toContain(`${url.hostname}:${url.port || 5432}${url.pathname}`);
  expect(written[0]).not.toMatch(/bp_no_such_role|s3cret/);
});

/**
 * A database that does not exist is a configuration error too (a typo in its name): the ORM used
 * to create it, so the service started on a new, empty database, migrated it and served from it.
 */
it('refuses a database that does not exist in one line, exits 78, and creates nothing', async () => {
  const url = new URL(db.url);
  url.pathname = `/${url.pathname.slice(1)}_typo`;
  const written = await startupExiting78(url);
  expect(written).toHaveLength(1);
  expect(written[0]).toMatch(/has no such database .*SQLSTATE 3D000/);
  expect(written[0]).toContain(`${url.hostname}:${url.port || 5432}${url.pathname}`);
  const server = new URL(db.url);
  server.pathname = '/postgres';
  const orm = await openDatabase({ url: server.toString(), schema: 'public', entities: [], poolMax: 1 });
  try {
    expect(await orm.em.fork().getConnection().execute('select count(*)::int as n from pg_database where datname = ?', [url.pathname.slice(1)])).toEqual([{ n: 0 }]);
  } finally {
    await orm.close();
  }
}, 30_000);
