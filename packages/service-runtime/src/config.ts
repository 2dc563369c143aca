import { z } from 'zod';
import { GrpcTlsConfig } from './grpc-transport.js';
import { natsServerOptions } from './nats.js';

export const PlatformMode = z.enum(['development', 'test', 'production']);
export type PlatformMode = z.infer<typeof PlatformMode>;

/** Settings every service reads. */
export const BaseConfig = z.object({
  /** Production unless asked otherwise: the launcher asks for development, the tests for test. */
  PLATFORM_MODE: PlatformMode.default('production'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Address of the operations listener (`/metrics`, `/health/live`, `/health/ready`). */
  METRICS_HOST: z.string().default('127.0.0.1'),
  /** Port of the operations listener; 0 picks a free one. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
  ...GrpcTlsConfig.shape,
});

/** Where a service that uses NATS reaches it; spread into its config (`...NatsConfig.shape`). */
export const NatsConfig = z.object({
  /**
   * NATS server(s) with JetStream, comma-separated, with the credentials in the URL:
   * `nats://user:password@host:port` (percent-encoded) or `nats://token@host:port`.
   */
  NATS_URL: z
    .string()
    .default('nats://127.0.0.1:4222')
    .superRefine((url, ctx) => {
      try {
        natsServerOptions(url);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
      }
    }),
  /**
   * `credentials` (the default): production requires NATS_URL to carry a password or token
   * that is a production secret. `none`: this NATS needs no credentials because it is
   * protected otherwise (reachable by the platform's services alone, or TLS client
   * certificates); production then accepts a NATS_URL without them.
   */
  NATS_AUTH: z.enum(['credentials', 'none']).default('credentials'),
});
export type NatsConfig = z.infer<typeof NatsConfig>;

/**
 * Why a production service must not use this NATS connection, or undefined: unless NATS_AUTH
 * is `none`, NATS_URL must carry a password or token passing `secretProblem`. Without one,
 * anyone who reaches NATS reads every event and forges events the services act on.
 */
export function natsCredentialsProblem(config: NatsConfig): string | undefined {
  if (config.NATS_AUTH === 'none') return undefined;
  const { pass, token } = natsServerOptions(config.NATS_URL);
  const secret = pass ?? token;
  if (!secret) {
    return 'NATS_URL has no credentials: give them in it (nats://user:password@host:4222, the password 32 random bytes as hex: openssl rand -hex 32), or set NATS_AUTH=none if this NATS is reachable by the platform\'s services alone or authenticates them otherwise';
  }
  const problem = secretProblem(secret);
  return problem && `NATS_URL's ${pass ? 'password' : 'token'} ${problem}`;
}

/**
 * `DATABASE_URL` of a service with a database: `postgres://user:password@host:port/database`
 * (or `postgresql://`). Checked with the rest of the config, so that a wrong value is one line
 * at start-up rather than the ORM's stack trace; the message never repeats the value, which
 * holds the password. A user or password written as is rather than percent-encoded (a base64
 * password with `/`, as docker-compose puts `POSTGRES_PASSWORD` into the URL) is encoded here,
 * so it reaches Postgres as written instead of making the URL unparsable.
 */
export const DatabaseUrl = z
  .string({ error: 'is required' })
  .transform((value) => withEncodedUserinfo(value))
  .superRefine((value, ctx) => {
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    if (!url || !['postgres:', 'postgresql:'].includes(url.protocol) || url.pathname.length < 2) {
      ctx.addIssue({ code: 'custom', message: 'must be a PostgreSQL URL naming its database, e.g. postgres://user:password@host:5432/billing (the value is not shown: it may hold a password)' });
    }
  });

/**
 * `value` unchanged when it parses as a URL; otherwise, when its user and password (everything
 * between `://` and the last `@`) hold characters a URL reserves, the same URL with them
 * percent-encoded. A URL that parses is never changed, so a password already encoded stays so.
 */
function withEncodedUserinfo(value: string): string {
  if (URL.canParse(value)) return value;
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(.*)@([^@]*)$/is.exec(value);
  if (!match) return value;
  const [, scheme, userinfo, rest] = match as unknown as [string, string, string, string];
  const colon = userinfo.indexOf(':');
  const encoded = colon < 0 ? encodeURIComponent(userinfo) : `${encodeURIComponent(userinfo.slice(0, colon))}:${encodeURIComponent(userinfo.slice(colon + 1))}`;
  const candidate = `${scheme}${encoded}@${rest}`;
  return URL.canParse(candidate) ? candidate : value;
}

/**
 * `DB_POOL_MAX` of a service with a database: its pooled connections to Postgres at most (the
 * sum over every process is bounded by the server's `max_connections`).
 */
/** The longest delay a Node timer holds (2^31-1 ms, 24.8 days): given more, setTimeout and setInterval fire after 1 ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/** A setting in milliseconds that becomes a timer's delay or interval: a whole number from `min` to `MAX_TIMER_MS`. */
export function TimerMs(min: number) {
  return z.coerce.number().int().min(min).max(MAX_TIMER_MS);
}

export const DbPoolMax = z.coerce.number().int().min(1).default(10);

/**
 * How a service with a database sets up its connections and batches, besides its pool size;
 * spread into its config (`...DatabaseTuning.shape`) and handed to `openDatabase` with
 * `databaseOptions`.
 */
export const DatabaseTuning = z.object({
  /**
   * The planner's `random_page_cost` on each connection (1.1 by default, for a working set in
   * memory or on SSD; `0` keeps the server's setting). Postgres's own default, 4, is for
   * spinning disks: with it, a statement that looks a few dozen rows up by key in a table of a
   * few thousand is planned as a scan of the whole table.
   */
  DB_RANDOM_PAGE_COST: z.coerce.number().min(0).max(100).default(1.1),
  /**
   * How many batches of each group-committed write or read (`Batcher`) run at once; calls
   * arriving meanwhile wait and share the next batch. 2 by default; 1 spends fewer statements
   * per request and makes each batch of a chain wait longer (see `setBatchesInFlight`).
   * Batchers with a limit of their own keep it (the gateway's idempotency records: 1; a
   * refund's or retry's provider calls: 8).
   */
  DB_BATCHES_IN_FLIGHT: z.coerce.number().int().min(1).max(64).default(2),
  /**
   * At start-up, how long a service keeps trying to reach a Postgres that refuses or is still
   * starting (60 s; `0`: once) before it exits with status 69 and a one-line message, so that
   * services started with their database (docker-compose, a rolling restart) wait for it.
   */
  DB_STARTUP_WAIT_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
});

/**
 * `DB_SCHEMA` of a service with a database: its schema, which is fixed (`identity`, `billing`,
 * `checkout`, `webhooks`, `gateway`): the migrations and hand-written statements name it. Any
 * other value is refused at start-up rather than half-working (tables made in one schema,
 * queried in another).
 */
export function FixedSchema<const S extends string>(schema: S) {
  return z.literal(schema, { error: () => `the schema is fixed: ${schema} (its migrations and statements name it); unset DB_SCHEMA` }).default(schema);
}

/**
 * `GRPC_GATHER` of a service whose clients gather their calls (see `createClient`): `1` (the
 * default) gathers the calls made to one server in one event-loop turn, `0` sends each alone.
 */
export const GrpcGather = z.enum(['0', '1']).default('1').transform((v) => v === '1');

/**
 * Parses the environment once at start-up. On failure prints every problem and exits, so a
 * misconfigured process never half-starts.
 */
export function parseConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const lines = result.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
  process.stderr.write(`Invalid configuration:\n${lines.join('\n')}\n`);
  process.exit(78);
}

/**
 * Development defaults of secrets, published in this repository: usable outside production
 * only. Every such default is listed here so production can refuse it when set explicitly.
 */
export const DEV_ENCRYPTION_KEY = 'development-only-encryption-key-do-not-use-in-production';
const PUBLISHED_SECRETS = new Set([DEV_ENCRYPTION_KEY]);

/** Bits of empirical (per-character) entropy; a crude check that a value is not a word or a pattern. */
function characterEntropyBits(value: string): number {
  const counts = new Map<string, number>();
  for (const c of value) counts.set(c, (counts.get(c) ?? 0) + 1);
  let perChar = 0;
  for (const n of counts.values()) perChar -= (n / value.length) * Math.log2(n / value.length);
  return perChar * value.length;
}

/**
 * Why `value` is not a production secret, or undefined when it is one: it must not be a
 * published development value, must encode at least 32 bytes as hex or base64(url) (e.g.
 * `openssl rand -base64 32`), and must look random: at least 160 bits of per-character entropy
 * (encoded random 32 bytes measure 178 or more), which rules out repeated characters, words
 * and short patterns. A heuristic: it cannot prove a value random, only refuse obvious non-random ones.
 */
export function secretProblem(value: string | undefined): string | undefined {
  if (!value) return 'is required';
  if (PUBLISHED_SECRETS.has(value)) return 'is the published development value';
  const bytes = /^[0-9a-fA-F]+$/.test(value) ? value.length / 2 : /^[A-Za-z0-9+/_-]+={0,2}$/.test(value) ? Math.floor((value.replace(/=+$/, '').length * 3) / 4) : 0;
  if (bytes === 0) return 'must be random bytes encoded as hex or base64 (e.g. openssl rand -base64 32)';
  if (bytes < 32) return `encodes ${bytes} bytes; at least 32 random bytes are required (e.g. openssl rand -base64 32)`;
  if (characterEntropyBits(value) < 160) return 'does not look random (repeated characters or a pattern); use openssl rand -base64 32';
  if (distinctFourGrams(value) < 0.85) return 'does not look random (it repeats itself); use openssl rand -base64 32';
  if (consecutivePairs(value) > 0.5) return 'does not look random (a run of consecutive characters); use openssl rand -base64 32';
  if (wordTrigrams(value) >= 8) return 'does not look random (it reads as words); use openssl rand -base64 32';
  return undefined;
}

/**
 * The measures below were calibrated on 300,000-400,000 values of `openssl rand`-like 32 random
 * bytes (base64, base64url, hex): their least distinct-4-gram share was 0.93, their largest
 * share of neighbouring characters one code point apart 0.35, and their most common-English
 * trigrams 5; the thresholds leave a wide margin, so a random value is never refused.
 */
function distinctFourGrams(value: string): number {
  const seen = new Set<string>();
  for (let i = 0; i + 4 <= value.length; i++) seen.add(value.slice(i, i + 4));
  return seen.size / Math.max(1, value.length - 3);
}

/** Share of neighbouring characters one code point apart (`abcd`, `0123`, `zyx`). */
function consecutivePairs(value: string): number {
  let n = 0;
  for (let i = 1; i < value.length; i++) if (Math.abs(value.charCodeAt(i) - value.charCodeAt(i - 1)) === 1) n++;
  return n / Math.max(1, value.length - 1);
}

/** Frequent English trigrams (and a few of secrets' own words); a passphrase has many, random bytes next to none. */
const WORD_TRIGRAMS = ['the', 'and', 'ing', 'ion', 'tio', 'ent', 'ati', 'for', 'her', 'ter', 'hat', 'tha', 'ere', 'ate', 'his', 'con', 'res', 'ver', 'all', 'ons', 'nce', 'men', 'ith', 'ted', 'ers', 'pro', 'thi', 'wit', 'are', 'ess', 'not', 'ive', 'was', 'ect', 'rea', 'com', 'eve', 'per', 'int', 'est', 'sta', 'cti', 'ica', 'ist', 'ear', 'ain', 'one', 'our', 'iti', 'rat', 'min', 'ret', 'cre', 'sec', 'key', 'ord', 'ass', 'pas', 'wor', 'adm', 'bil', 'ill', 'lin'];

function wordTrigrams(value: string): number {
  const lower = value.toLowerCase();
  let n = 0;
  for (const t of WORD_TRIGRAMS) for (let i = lower.indexOf(t); i >= 0; i = lower.indexOf(t, i + 1)) n++;
  return n;
}

/**
 * In production, refuses to start unless every given secret of the parsed config passes
 * `secretProblem`, and, with `nats` (the config of a service that uses NATS), its NATS
 * connection is authenticated (`natsCredentialsProblem`); prints each problem (never a value)
 * and exits. Outside production, any value.
 */
export function refuseWeakSecretsInProduction(mode: PlatformMode, secrets: Record<string, string | undefined>, opts: { nats?: NatsConfig } = {}): void {
  if (mode !== 'production') return;
  const problems = Object.entries(secrets).flatMap(([name, value]) => {
    const problem = secretProblem(value);
    return problem ? [`  ${name} ${problem}`] : [];
  });
  const nats = opts.nats && natsCredentialsProblem(opts.nats);
  if (nats) problems.push(`  ${nats}`);
  if (problems.length) {
    process.stderr.write(`Invalid configuration for production mode:\n${problems.join('\n')}\n`);
    process.exit(78);
  }
}
