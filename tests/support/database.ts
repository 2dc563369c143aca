import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A database of its own for one test run or suite, on the server in DATABASE_URL. */
export interface TestDatabase {
  name: string;
  /** Connection string of the new database. */
  url: string;
  /** Drops the database, disconnecting anything still connected to it. */
  drop(): Promise<void>;
}

/** Prefix of every test database; `npm test` drops leftovers of killed runs on its own server. */
export const TEST_DATABASE_PREFIX = 'bp_test_';

/**
 * Creates an empty, uniquely named database (`bp_test_<random>`) on the server in
 * `serverUrl`, so concurrent runs never share data.
 */
export async function createTestDatabase(serverUrl = process.env.DATABASE_URL): Promise<TestDatabase> {
  if (!serverUrl) throw new Error('DATABASE_URL is not set: run the tests with `npm test`, or point DATABASE_URL at a Postgres server');
  const name = `${TEST_DATABASE_PREFIX}${randomBytes(6).toString('hex')}`;
  await onServer(serverUrl, (client) => client.query(`create database ${client.escapeIdentifier(name)}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    name,
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      await onServer(serverUrl, (client) => client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`));
    },
  };
}

/** Runs `fn` on a connection of its own to the server in `serverUrl` (its default database), closed after. */
export async function onServer<T>(serverUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
