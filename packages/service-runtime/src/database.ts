import { DriverException, MikroORM, raw, type EntityManager, type EntitySchema, type Knex, type MigrationObject, type Options } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { setBatchesInFlight } from './batcher.js';
import type { Logger } from './logger.js';

export interface DatabaseOptions {
  /** Connection string of the PostgreSQL server. */
  url: string;
  /** The one Postgres schema this service owns. Every table and the migrations table live in it. */
  schema: string;
  entities: EntitySchema<any>[];
  poolMax?: number;
  /** The planner's `random_page_cost` on every connection (see `DatabaseTuning`); 0 or absent keeps the server's. */
  randomPageCost?: number;
  /** The process's batches in flight per `Batcher` (see `DatabaseTuning`); absent keeps the current setting. */
  batchesInFlight?: number;
  /**
   * Start-up only: how long to keep trying while the server is unreachable or not accepting
   * connections yet (`DB_STARTUP_WAIT_MS`), then exit with a one-line message (status 69,
   * EX_UNAVAILABLE) rather than a stack trace. Absent: the first failure is thrown.
   */
  startupWaitMs?: number;
  logger?: Logger;
}

/**
 * One migration of a service's schema. `load` imports its class, and with it MikroORM's
 * migrator (umzug, knex's schema builder: about 10 MB of RSS), so that a process whose schema is
 * up to date never loads either.
 */
export interface MigrationSource {
  /** Stored in the schema's `mikro_orm_migrations` table once applied. */
  name: string;
  load(): Promise<MigrationObject['class']>;
}

const MIGRATIONS_TABLE = 'mikro_orm_migrations';

/** `openDatabase`'s options from a service's config (its URL, schema, pool size and `DatabaseTuning`), but for its entities. */
export function databaseOptions(config: {
  DATABASE_URL: string;
  DB_SCHEMA: string;
  DB_POOL_MAX: number;
  DB_RANDOM_PAGE_COST: number;
  DB_BATCHES_IN_FLIGHT: number;
  DB_STARTUP_WAIT_MS: number;
}): Omit<DatabaseOptions, 'entities'> {
  return {
    url: config.DATABASE_URL,
    schema: config.DB_SCHEMA,
    poolMax: config.DB_POOL_MAX,
    randomPageCost: config.DB_RANDOM_PAGE_COST,
    batchesInFlight: config.DB_BATCHES_IN_FLIGHT,
    startupWaitMs: config.DB_STARTUP_WAIT_MS,
  };
}

/** MikroORM pinned to the service's own schema; `migrate` applies its migrations. */
export async function openDatabase(opts: DatabaseOptions): Promise<MikroORM> {
  if (opts.batchesInFlight !== undefined) setBatchesInFlight(opts.batchesInFlight);
  const session = [`set search_path to "${opts.schema}", public`];
  if (opts.randomPageCost) session.push(`set random_page_cost = ${Number(opts.randomPageCost)}`);
  const config: Options = {
    clientUrl: opts.url,
    schema: opts.schema,
    entities: opts.entities,
    migrations: {
      tableName: MIGRATIONS_TABLE,
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      silent: true,
    },
    pool: {
      min: 1,
      max: opts.poolMax ?? 10,
      // Raw SQL in the service sees its own schema first, as the entities do; and the planner
      // prices a page read by key as the deployment asks (one round trip for both settings).
      afterCreate: (conn: { query(sql: string, cb: (err?: Error) => void): void }, done: (err: Error | undefined, conn: unknown) => void) =>
        conn.query(session.join('; '), (err) => done(err, conn)),
    },
    // Entities are plain EntitySchema definitions; nothing to discover from TS metadata.
    discovery: { warnWhenNoEntities: false },
    allowGlobalContext: false,
    forceUtcTimezone: true,
    debug: false,
    // The database must exist: MikroORM would otherwise create the one DATABASE_URL names, so a
    // typo in its name started the service on a new, empty database (migrated, listening, the
    // real data nowhere). The launcher, the tests and docker-compose create theirs.
    ensureDatabase: false,
    ...(opts.logger ? { driverOptions: { log: queryBuilderLog(opts.logger) } } : {}),
  };
  if (opts.startupWaitMs === undefined) return initConnected(config);
  const deadline = Date.now() + opts.startupWaitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await initConnected(config);
    } catch (e) {
      // Only a server that cannot serve yet is waited for; anything else is a configuration
      // error, not waited for. A refused login (SQLSTATE class 28), the usual one, is said in
      // one line like the other configuration errors, without the server's message (it names
      // the user).
      const where = serverOf(opts.url);
      if (!databaseUnavailableError(e)) {
        const code = String(codeOf(e));
        if (code === '3D000') exitMisconfigured(`PostgreSQL at ${where} has no such database (SQLSTATE 3D000); create it, or check the name in DATABASE_URL (services do not create databases)`);
        if (code.startsWith('28')) exitMisconfigured(`PostgreSQL at ${where} refused the login (unknown user, wrong password, or no pg_hba.conf entry for it; SQLSTATE ${code}); check DATABASE_URL`);
        throw e;
      }
      const reason = String(codeOf(e) ?? (e as Error).name);
      if (Date.now() >= deadline) {
        process.stderr.write(`Cannot reach PostgreSQL at ${where} (${reason}) after ${opts.startupWaitMs} ms (DB_STARTUP_WAIT_MS); exiting.\n`);
        process.exit(69);
      }
      opts.logger?.warn({ server: where, reason, attempt }, 'PostgreSQL not reachable yet; retrying');
      await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** (attempt - 1), 5_000, Math.max(0, deadline - Date.now()))));
    }
  }
}

/** Ends the start-up as every configuration error does: one line on stderr, exit status 78. */
function exitMisconfigured(message: string): never {
  process.stderr.write(`${message}; exiting.\n`);
  process.exit(78);
}

/**
 * MikroORM with one statement run: without `ensureDatabase` the ORM connects lazily, and a server
 * that refuses, a login it refuses or a database it lacks would otherwise surface at the first
 * request instead of at start-up.
 */
async function initConnected(config: Options): Promise<MikroORM> {
  const orm = await MikroORM.init(config);
  try {
    await orm.em.getConnection().execute('select 1');
    return orm;
  } catch (e) {
    await orm.close(true).catch(() => undefined);
    throw e;
  }
}

/**
 * knex (under the ORM) reports a pooled connection that died (the server restarted, a proxy
 * dropped it: `Connection Error: …`) with `console.log`, a bare line among the service's JSON
 * ones; these hand its messages to the service's logger instead.
 */
function queryBuilderLog(logger: Logger) {
  const write = (level: 'debug' | 'warn' | 'error') => (message: unknown) =>
    logger[level]({ component: 'knex' }, typeof message === 'string' ? message : 'query builder message');
  return {
    debug: write('debug'),
    warn: write('warn'),
    error: write('error'),
    deprecate: (method: string, alternative: string) => logger.debug({ component: 'knex' }, `${method} is deprecated; use ${alternative}`),
  };
}

/**
 * The filter of the rows whose `email` is `email` in any letter case (emails are stored as sent),
 * served by a table's index on `lower(email)`.
 */
export function emailInAnyCase(email: string) {
  return { [raw((alias) => `lower(${alias}.email)`)]: email.toLowerCase() };
}

/** `host:port/database` of a connection string: never its user or password. */
function serverOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return '(unparsable DATABASE_URL)';
  }
}

/**
 * Applies pending migrations of the service's schema, in the order given; safe to run
 * concurrently from replicas. Returns the names applied. When every name is already recorded
 * in the schema, neither the migrator nor any migration class is loaded.
 */
export async function migrate(orm: MikroORM, schema: string, migrations: readonly MigrationSource[]): Promise<string[]> {
  // Committed before the migrations' transaction, whose migrator checks for it on other
  // connections. Two processes creating it at once race (one gets a duplicate-key error, and
  // the schema then exists).
  try {
    await orm.em.getConnection().execute(`create schema if not exists "${schema}"`);
  } catch (e) {
    if ((e as { code?: string }).code !== '23505') throw e;
  }
  // Serialise concurrent migrators (several replicas starting at once) on a per-schema lock.
  const lockKey = [...schema].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, 7);
  return orm.em.transactional(async (em) => {
    // In this transaction (em.execute, not the connection's execute, which would take and drop
    // it at once on another pooled connection), held until it ends; the migrations run in it too.
    await em.execute('select pg_advisory_xact_lock(?)', [lockKey]);
    const table = `"${schema}"."${MIGRATIONS_TABLE}"`;
    const [{ exists }] = await em.execute<{ exists: boolean }[]>(`select to_regclass(?) is not null as "exists"`, [table]);
    const recorded = exists ? new Set((await em.execute<{ name: string }[]>(`select name from ${table}`)).map((r) => r.name)) : new Set<string>();
    if (migrations.every((m) => recorded.has(m.name))) return [];
    const { Migrator } = await import('@mikro-orm/migrations');
    const migrationsList = await Promise.all(migrations.map(async (m) => ({ name: m.name, class: await m.load() })));
    orm.config.set('migrations', { ...orm.config.get('migrations'), migrationsList });
    const applied = await new Migrator(em).up({ transaction: em.getTransactionContext() });
    return applied.map((m) => m.name);
  });
}

/**
 * The instant of a timestamp as the ORM's pool returns it: text in Postgres's output format
 * ("0050-03-01 00:00:00+00", "2030-01-15 10:00:00.123+00", or ISO 8601 from `to_jsonb`), or a
 * Date. Not `new Date(text)`: V8 reads the Postgres format with its legacy parser, which takes
 * the years 0 to 99 as 1900 to 1999 (a period starting 0050-03-01 came back as 1950).
 */
export function instantOfRow(v: Date | string): Date {
  if (typeof v !== 'string') return v;
  // As ISO 8601, which V8 reads with the year as written: "T" between date and time, and a zone "+HH" as "+HH:MM".
  const d = new Date(v.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00'));
  if (Number.isNaN(d.getTime())) throw new Error(`Not a Postgres timestamp: ${v}`);
  return d;
}

/**
 * Where `queryRows` runs its SQL: an EntityManager (in its transaction when it has one), or the
 * connection of a `transactPrepared` transaction (its `PreparedQuery`).
 */
export type SqlContext = EntityManager | PreparedQuery;

/**
 * Runs SQL with `?` parameters bound by the Postgres driver (sent apart from the statement, not
 * escaped into it as `em.execute` does), in `db`'s transaction when there is one. For hot paths
 * that pass large parameters, e.g. a batch as one JSON document. Returns the rows. Given a
 * `transactPrepared` connection, the statement goes unnamed, its `?` numbered as `$n`.
 */
export async function queryRows<T = Record<string, any>>(db: SqlContext, sql: string, params: readonly unknown[] = []): Promise<T[]> {
  if (typeof db === 'function') return (await db<T>(undefined, numberedParameters(sql, params.length), params)).rows;
  const runner = (db.getTransactionContext() as Knex.Transaction | undefined) ?? db.getConnection().getKnex();
  const res = (await runner.raw(sql, params as Knex.ValueDict[])) as { rows: T[] };
  return res.rows;
}

/**
 * `sql` with its `?` parameters numbered `$1`, `$2`, … (outside quoted strings and identifiers);
 * throws unless there are exactly `count`. The SQL given to `queryRows` uses no `?` operator.
 */
export function numberedParameters(sql: string, count: number): string {
  let n = 0;
  let quote: string | null = null;
  let out = '';
  for (const ch of sql) {
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === '?') {
      out += `$${++n}`;
      continue;
    }
    out += ch;
  }
  if (n !== count) throw new Error(`SQL has ${n} parameters, given ${count}`);
  return out;
}

/** The part of a node-postgres client `queryPrepared` uses. */
interface PgClient {
  query(config: { name?: string; text: string; values: readonly unknown[] }): Promise<{ rowCount: number | null; rows: unknown[] }>;
}

/**
 * Runs one statement as a named prepared statement (parsed and planned once per connection; with
 * no name, unnamed, as `PreparedQuery` says) with `$n` parameters bound by the driver, on a
 * connection of the ORM's pool, outside any transaction. For hot single-statement paths; arrays
 * are sent as Postgres arrays (for `unnest`).
 */
export async function queryPrepared<T = Record<string, any>>(orm: MikroORM, name: string | undefined, text: string, values: readonly unknown[]): Promise<{ rows: T[]; rowCount: number }> {
  const client = orm.em.getConnection().getKnex().client as { acquireConnection(): Promise<PgClient>; releaseConnection(c: PgClient): Promise<void> };
  const conn = await client.acquireConnection();
  try {
    const res = await conn.query({ name, text, values });
    return { rows: res.rows as T[], rowCount: res.rowCount ?? 0 };
  } finally {
    await client.releaseConnection(conn);
  }
}

/**
 * Runs one statement on the connection it is given to: a named prepared statement (see
 * `queryPrepared`), or, with no name, an unnamed one, parsed and planned for each call with the
 * tables' sizes of the moment (for statements whose best plan changes as a table grows from
 * empty: a connection keeps a named statement's generic plan until the table is next analyzed).
 */
export type PreparedQuery = <T = Record<string, any>>(name: string | undefined, text: string, values: readonly unknown[]) => Promise<{ rows: T[]; rowCount: number }>;

/** `queryPrepared` on the ORM's pool as a `PreparedQuery`: each statement on a connection of its own, outside any transaction. */
export function pooledQuery(orm: MikroORM): PreparedQuery {
  return (name, text, values) => queryPrepared(orm, name, text, values);
}

/**
 * Runs `work` in one transaction on one connection of the ORM's pool, its statements prepared
 * as `queryPrepared`'s are: COMMIT when `work` resolves, ROLLBACK when it throws (the error is
 * rethrown). For hot multi-statement writes whose decision is made in JS between a locking read
 * and the write, at one round trip per statement.
 */
export async function transactPrepared<R>(orm: MikroORM, work: (query: PreparedQuery) => Promise<R>): Promise<R> {
  const client = orm.em.getConnection().getKnex().client as { acquireConnection(): Promise<PgClient>; releaseConnection(c: PgClient): Promise<void> };
  const conn = (await client.acquireConnection()) as PgClient & { query(text: string): Promise<unknown> };
  try {
    await conn.query('begin');
    let result: R;
    try {
      result = await work(async (name, text, values) => {
        const res = await conn.query({ name, text, values });
        return { rows: res.rows as never[], rowCount: res.rowCount ?? 0 };
      });
    } catch (e) {
      // Only a broken connection fails to roll back; the original error is the one to report.
      await conn.query('rollback').catch(() => undefined);
      throw e;
    }
    await conn.query('commit');
    return result;
  } finally {
    await client.releaseConnection(conn);
  }
}

/** Whether `e` is Postgres's unique violation (23505) of the constraint or unique index named `constraint`. */
export function isUniqueViolation(e: unknown, constraint: string): boolean {
  const { code, constraint: violated } = e as { code?: string; constraint?: string };
  return code === '23505' && violated === constraint;
}

/**
 * MikroORM's typed exception (`UniqueConstraintViolationException`,
 * `ForeignKeyConstraintViolationException`, …) for an error Postgres raised through
 * `queryPrepared` or `transactPrepared`, which bypass the ORM and its translation; any other
 * error as it is. A repository written in SQL translates its errors with this at its edge, so its
 * callers catch the same exceptions as from one written with the ORM.
 */
export function typedDatabaseError(orm: MikroORM, e: unknown): unknown {
  const raised = e instanceof Error && typeof (e as { severity?: unknown }).severity === 'string' && typeof (e as { routine?: unknown }).routine === 'string';
  return raised && !(e instanceof DriverException) ? orm.em.getDriver().convertException(e) : e;
}

/** The SQLSTATE (or the socket's errno code) of a database error, as the ORM or node-postgres raised it. */
function codeOf(e: unknown): unknown {
  return e instanceof DriverException ? e.code : (e as { code?: unknown } | null)?.code;
}

/**
 * Errors that say the database cannot serve now rather than that a request was wrong: SQLSTATE
 * class 53 (insufficient resources, e.g. 53300 too_many_connections: every connection slot, or
 * a role's connection limit, is taken), 57P01–57P03 (the server shutting down or starting up),
 * class 08 but 08P01 (the connection failed), and a connection refused, reset or timed out, or
 * no pooled connection within the pool's wait. Answering them `service_unavailable` (503 with
 * `Retry-After`) tells the caller to retry, where a 500 would say something broke.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03']);
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE']);

/** The `service_unavailable` error for a database that cannot serve now (see above), or undefined for any other error. */
export function databaseUnavailableError(e: unknown): DomainError | undefined {
  const code = codeOf(e);
  const name = (e as { name?: unknown } | null)?.name;
  const unavailable =
    (typeof code === 'string' && (code.startsWith('53') || UNAVAILABLE_SQLSTATES.has(code) || (code.startsWith('08') && code !== '08P01') || UNAVAILABLE_ERRNOS.has(code))) ||
    name === 'KnexTimeoutError';
  return unavailable ? new DomainError('service_unavailable', 'The database is unavailable or at its connection limit; retry shortly.', { retryAfterSeconds: 1 }) : undefined;
}

/**
 * SQLSTATEs of text Postgres cannot store: 22021 character_not_in_repertoire (a NUL or invalid
 * UTF-8 in a bound parameter), 22P05 untranslatable_character (`\u0000` in jsonb), and 08P01
 * protocol_violation, which is what a NUL becomes when MikroORM inlines bound values into the
 * statement text (the wire protocol's strings are NUL-terminated). MikroORM has no typed
 * exception for them, so they arrive as its base DriverException (or as pg's own error).
 */
const INVALID_TEXT_SQLSTATES = new Set(['22021', '22P05', '08P01']);

/**
 * The bad-request error for text the database refused, or undefined for any other error. A
 * backstop behind the gateway's input policy: the caller sent it, so it is their 400, not a
 * 500 (which would also burn their Idempotency-Key). The message names no value: the driver's
 * text quotes the SQL and its bound values, which must never reach a log or a client.
 */
export function invalidTextError(e: unknown): DomainError | undefined {
  const code = codeOf(e);
  if (typeof code !== 'string' || !INVALID_TEXT_SQLSTATES.has(code)) return undefined;
  return new DomainError('bad_request', 'The request contains text that cannot be stored (a NUL character or invalid UTF-8).');
}
