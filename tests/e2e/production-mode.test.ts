import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { SecretBox } from '@billing/service-runtime';
import { REPO_ROOT } from '../../scripts/lib/start-platform.mjs';
import { createTestDatabase, onServer } from '../support/database.js';
import { eventually } from '../support/fixtures.js';

// Services used to start in development mode unless told otherwise, and production mode
// accepted the published development encryption key when it was set explicitly.
const DEV_KEY = 'development-only-encryption-key-do-not-use-in-production';
const strong = () => randomBytes(32).toString('base64');
/** An authenticated NATS_URL (nothing listens there: these services stop at their configuration or database). */
const natsWithCredentials = () => `nats://billing:${randomBytes(32).toString('hex')}@127.0.0.1:1`;

/** Runs a built service with only `env` (no PLATFORM_MODE unless given) until it exits. */
function runService(service: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(REPO_ROOT, 'services', service, 'dist', 'main.js')], {
      cwd: REPO_ROOT,
      // DB_STARTUP_WAIT_MS=0: a service past its configuration stops at the unreachable database at once.
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', DB_STARTUP_WAIT_MS: '0', LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('production mode refuses unsafe settings at start-up', () => {
  it('is the default: identity without PLATFORM_MODE or a key refuses to start, naming the key missing (it said the development value)', async () => {
    const { code, output } = await runService('identity', {});
    expect(code).toBe(78);
    expect(output).toContain('IDENTITY_ENCRYPTION_KEY is required');
  });

  it('refuses the published development key even when set explicitly', async () => {
    const { code, output } = await runService('billing', { PLATFORM_MODE: 'production', BILLING_ENCRYPTION_KEY: DEV_KEY });
    expect(code).toBe(78);
    expect(output).toContain('BILLING_ENCRYPTION_KEY is the published development value');
    expect(output).not.toContain(DEV_KEY);
  });

  it('refuses a key of fewer than 32 random bytes', async () => {
    const short = randomBytes(24).toString('base64');
    const { code, output } = await runService('identity', { PLATFORM_MODE: 'production', IDENTITY_ENCRYPTION_KEY: short });
    expect(code).toBe(78);
    expect(output).toContain('IDENTITY_ENCRYPTION_KEY encodes 24 bytes; at least 32 random bytes are required');
    expect(output).not.toContain(short);
  });

  it('refuses an admin token that is long enough but not random', async () => {
    const { code, output } = await runService('gateway', { PLATFORM_MODE: 'production', BILLING_ADMIN_TOKEN: 'ab'.repeat(32) });
    expect(code).toBe(78);
    expect(output).toContain('BILLING_ADMIN_TOKEN does not look random');
  });

  it('refuses to serve gRPC in plaintext on a non-loopback address, as a configuration error (it exited 1 with a stack trace)', async () => {
    const { code, output } = await runService('checkout', { PLATFORM_MODE: 'production', CHECKOUT_GRPC_ADDRESS: '0.0.0.0:0', NATS_URL: natsWithCredentials() });
    expect(code).toBe(78);
    expect(output).toContain('Invalid configuration:\n  refusing to serve gRPC on 0.0.0.0:0 without TLS in production mode');
    expect(output).not.toMatch(/\n\s+at /);
  });

  it('refuses to call gRPC in plaintext at a non-loopback address, as a configuration error before anything else (it exited 1 with a stack trace once its database was up)', async () => {
    const { code, output } = await runService('gateway', { PLATFORM_MODE: 'production', BILLING_ADMIN_TOKEN: strong(), NATS_URL: natsWithCredentials(), WEBHOOKS_GRPC_URL: 'webhooks:50054' });
    expect(code).toBe(78);
    expect(output).toContain('Invalid configuration:\n  refusing to call gRPC at webhooks:50054 without TLS in production mode');
    expect(output).not.toMatch(/\n\s+at /);
    const checkout = await runService('checkout', { PLATFORM_MODE: 'production', NATS_URL: natsWithCredentials(), BILLING_GRPC_URL: 'billing:50052' });
    expect(checkout.code).toBe(78);
    expect(checkout.output).toContain('refusing to call gRPC at billing:50052 without TLS in production mode');
  });

  it('refuses an IDENTITY_ENCRYPTION_KEY that does not open the signing keys stored with another, as a configuration error (it exited 1 with a stack trace)', async () => {
    // The test platform's database: its token-signing keys were sealed with the platform's key, not this one.
    const other = strong();
    const { code, output } = await runService('identity', {
      PLATFORM_MODE: 'test',
      DATABASE_URL: inject('databaseUrl'),
      IDENTITY_ENCRYPTION_KEY: other,
      IDENTITY_GRPC_ADDRESS: '127.0.0.1:0',
      METRICS_PORT: '0',
      NATS_URL: natsWithCredentials(),
    });
    expect(code).toBe(78);
    expect(output).toContain('Invalid configuration:\n  IDENTITY_ENCRYPTION_KEY: a stored secret (identity/token-signing-keys) does not open with the configured encryption key');
    expect(output).not.toMatch(/\n\s+at /);
    expect(output).not.toContain(other);
  });

  it('refuses a BILLING_ENCRYPTION_KEY that does not open the stored gateway credentials, as a configuration error at start (a provider update was a 500 much later)', async () => {
    const db = await createTestDatabase();
    try {
      const sealedWith = strong();
      const env = { PLATFORM_MODE: 'test', DATABASE_URL: db.url, BILLING_GRPC_ADDRESS: '127.0.0.1:0', METRICS_PORT: '0', NATS_URL: natsWithCredentials() };
      // Billing migrates its schema and runs on (NATS unreachable); stopped once the schema is there.
      const first = spawn(process.execPath, [path.join(REPO_ROOT, 'services', 'billing', 'dist', 'main.js')], {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'fatal', BILLING_ENCRYPTION_KEY: sealedWith, ...env },
        stdio: 'ignore',
      });
      const exited = new Promise((resolve) => first.on('exit', resolve));
      try {
        await eventually(async () => (await onServer(db.url, (c) => c.query(`select to_regclass('billing.merchants') as t`))).rows[0].t, 20_000, 100);
      } finally {
        first.kill('SIGKILL');
        await exited;
      }
      const credentials = new SecretBox(sealedWith, 'billing/payment-gateway-credentials').seal(JSON.stringify({ gatewayUsername: 'gw', gatewayPassword: 'gw-secret' }));
      await onServer(db.url, (c) =>
        c.query(`insert into billing.merchants (id, name, contact_email, provider_credentials_sealed, gateway_configured, created_at, updated_at) values ($1, 'Sealed', 'sealed@example.com', $2, true, now(), now())`, [randomUUID(), credentials]),
      );
      const other = strong();
      const { code, output } = await runService('billing', { ...env, BILLING_ENCRYPTION_KEY: other });
      expect(code).toBe(78);
      expect(output).toContain('Invalid configuration:\n  BILLING_ENCRYPTION_KEY: a stored secret (billing/payment-gateway-credentials) does not open with the configured encryption key');
      expect(output).not.toMatch(/\n\s+at /);
      expect(output).not.toContain(other);
      expect(output).not.toContain('gw-secret');
    } finally {
      await db.drop();
    }
  });

  it('refuses TLS settings it cannot use with their reason and status 78', async () => {
    const partial = await runService('billing', { PLATFORM_MODE: 'test', GRPC_TLS_CA: '/nonexistent/ca.crt' });
    expect(partial.code).toBe(78);
    expect(partial.output).toContain('GRPC_TLS_CA, GRPC_TLS_CERT and GRPC_TLS_KEY must be set together');
    const missing = await runService('billing', { PLATFORM_MODE: 'test', GRPC_TLS_CA: '/nonexistent/ca.crt', GRPC_TLS_CERT: '/nonexistent/c.crt', GRPC_TLS_KEY: '/nonexistent/c.key' });
    expect(missing.code).toBe(78);
    expect(missing.output).toContain('GRPC_TLS_CA: cannot read /nonexistent/ca.crt (ENOENT)');
    expect(missing.output).not.toMatch(/\n\s+at /);
  });

  it('waits DB_STARTUP_WAIT_MS for an unreachable database, then exits 69 with one line naming the server but not the user (it crashed at once with a stack trace)', async () => {
    const started = Date.now();
    const { code, output } = await runService('billing', { PLATFORM_MODE: 'test', DB_STARTUP_WAIT_MS: '1500', LOG_LEVEL: 'info' });
    expect(code).toBe(69);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    expect(output).toContain('PostgreSQL not reachable yet; retrying');
    expect(output).toContain('Cannot reach PostgreSQL at 127.0.0.1:1/none (ECONNREFUSED) after 1500 ms (DB_STARTUP_WAIT_MS); exiting.');
    expect(output).not.toContain('nobody');
    expect(output).not.toMatch(/\n\s+at /);
  });

  it('refuses a NATS connection without credentials, unless NATS_AUTH=none says NATS is protected otherwise', async () => {
    const refused = await runService('webhooks', { PLATFORM_MODE: 'production', NATS_URL: 'nats://127.0.0.1:1' });
    expect(refused.code).toBe(78);
    expect(refused.output).toContain('NATS_URL has no credentials');
    const weak = await runService('webhooks', { PLATFORM_MODE: 'production', NATS_URL: 'nats://billing:billing@127.0.0.1:1' });
    expect(weak.code).toBe(78);
    expect(weak.output).toContain("NATS_URL's password");
    const optedOut = await runService('webhooks', { PLATFORM_MODE: 'production', NATS_URL: 'nats://127.0.0.1:1', NATS_AUTH: 'none' });
    expect(optedOut.output).not.toContain('Invalid configuration');
  });

  it('starts with strong secrets (identity gets past its configuration to the database)', async () => {
    const { output } = await runService('identity', { PLATFORM_MODE: 'production', IDENTITY_ENCRYPTION_KEY: strong(), NATS_URL: natsWithCredentials() });
    expect(output).not.toContain('Invalid configuration');
  });
});
