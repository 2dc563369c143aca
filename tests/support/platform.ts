import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPlatform, type Platform } from '../../scripts/lib/start-platform.mjs';
import { createTestDatabase, type TestDatabase } from './database.js';
import { createHttpClient, type HttpClient } from './http.js';
import { startTestNats, type TestNats } from './nats.js';

export interface TestPlatformOptions {
  /** Services to start; default every built one. */
  services?: string[];
  /** Env overrides for every service (undefined unsets a variable). */
  env?: Record<string, string | undefined>;
  /** Env overrides per service. */
  serviceEnv?: Record<string, Record<string, string | undefined>>;
  /** Use this database instead of creating a fresh one. */
  databaseUrl?: string;
  /** Use this NATS server instead of starting a private one. */
  natsUrl?: string;
  adminToken?: string;
  /** LOG_LEVEL of the services; default warn. */
  logLevel?: string;
  /** Echo service output to stderr as it arrives (also with PLATFORM_LOGS=1). */
  logs?: boolean;
  /** Called with every line of service output (e.g. to assert what reaches the logs). */
  onLog?: (service: string, line: string) => void;
  /** Called with the pid of every service process the launcher spawns (e.g. to race it for its port). */
  onSpawn?: (service: string, pid: number) => void;
}

export interface TestPlatform extends Platform {
  /** The fresh database (absent when `databaseUrl` was given). */
  database?: TestDatabase;
  /** The private NATS server (absent when `natsUrl` was given). */
  nats?: TestNats;
  /** Requests to the gateway. */
  http: HttpClient;
  /** DATA_DIR of the services: file-based email lands in `<dataDir>/mail/`, SMS in `<dataDir>/sms/`. */
  dataDir: string;
  /** Stops the services, then the private NATS server, then drops the database. */
  stop(): Promise<void>;
}

/**
 * Runs the built services in test mode against a fresh database and a private NATS server,
 * on free ports, so concurrent runs on one machine do not collide.
 */
export async function startTestPlatform(opts: TestPlatformOptions = {}): Promise<TestPlatform> {
  const undo: (() => Promise<void>)[] = [];
  const cleanUp = async () => {
    for (const fn of undo.reverse()) await fn().catch((e) => console.error('test platform clean-up failed:', e));
  };
  try {
    const database = opts.databaseUrl ? undefined : await createTestDatabase();
    if (database) undo.push(() => database.drop());
    const nats = opts.natsUrl ? undefined : await startTestNats();
    if (nats) undo.push(() => nats.stop());

    const dataDir = opts.env?.DATA_DIR ?? (await mkdtemp(join(tmpdir(), 'bp-test-data-')));
    if (!opts.env?.DATA_DIR) undo.push(() => rm(dataDir, { recursive: true, force: true }));

    const echo = opts.logs ?? process.env.PLATFORM_LOGS === '1';
    const platform = await startPlatform({
      databaseUrl: opts.databaseUrl ?? database!.url,
      natsUrl: opts.natsUrl ?? nats!.url,
      mode: 'test',
      logLevel: opts.logLevel ?? 'warn',
      adminToken: opts.adminToken ?? randomBytes(32).toString('base64url'),
      services: opts.services,
      // The billing scheduler is off in tests: they run billing themselves with an explicit asOf.
      env: { DATA_DIR: dataDir, BILLING_RUN_INTERVAL_MS: '0', ...opts.env },
      serviceEnv: opts.serviceEnv,
      ports: 'free',
      host: '127.0.0.1',
      onSpawn: opts.onSpawn,
      onLog:
        echo || opts.onLog
          ? (name, line) => {
              opts.onLog?.(name, line);
              if (echo) process.stderr.write(`${name} | ${line}\n`);
            }
          : undefined,
      onUnexpectedExit: (name, status, logs) => {
        const how = status.signal ? `was killed by ${status.signal}` : `exited with code ${status.code}`;
        console.error(`test platform: ${name} ${how} unexpectedly; its last output:\n${logs.slice(-30).join('\n')}`);
      },
    });
    undo.push(() => platform.stop());

    const gatewayUrl = platform.gatewayUrl;
    return {
      ...platform,
      database,
      nats,
      dataDir,
      http: gatewayUrl
        ? createHttpClient(gatewayUrl)
        : async () => {
            throw new Error('the gateway is not running in this test platform');
          },
      stop: cleanUp,
    };
  } catch (e) {
    await cleanUp();
    throw e;
  }
}

/**
 * Another gateway replica of `platform`: its database, NATS and admin token, talking to its
 * identity and billing, with `env` on top (limits, say). The caller stops it.
 */
export function startGatewayReplica(platform: TestPlatform, env: Record<string, string> = {}, opts: { logLevel?: string } = {}): Promise<Platform> {
  return startPlatform({
    databaseUrl: platform.databaseUrl,
    natsUrl: platform.natsUrl,
    mode: 'test',
    logLevel: opts.logLevel ?? 'warn',
    adminToken: platform.adminToken,
    services: ['gateway'],
    serviceEnv: { gateway: { IDENTITY_GRPC_URL: platform.processes.identity!.address, BILLING_GRPC_URL: platform.processes.billing!.address, ...env } },
  });
}
