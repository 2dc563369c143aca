import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../scripts/lib/start-platform.mjs';
import { eventually } from '../support/fixtures.js';

/**
 * `npm start` supervises its services, and the nats-server and the embedded Postgres it started
 * itself (no NATS_URL, no DATABASE_URL given): one killed with SIGKILL is started again and
 * becomes healthy, the launcher keeps running, and Ctrl-C still stops everything.
 */
let launcher: ChildProcess;
let output = '';

const waitForOutput = async (pattern: RegExp, timeoutMs: number) => {
  const end = Date.now() + timeoutMs;
  while (!pattern.test(output)) {
    if (Date.now() > end) throw new Error(`no ${pattern} in the launcher's output:\n${output.slice(-4000)}`);
    if (launcher.exitCode !== null) throw new Error(`the launcher exited (${launcher.exitCode}):\n${output.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

/** The pid of a child as the launcher recorded it (`.data/launchers/<launcher pid>.json`), by its command line. */
function pidRunning(command: string): number | undefined {
  const record = JSON.parse(readFileSync(join(REPO_ROOT, '.data', 'launchers', `${launcher.pid}.json`), 'utf8')) as { children: { pid: number; cmdline?: string }[] };
  return record.children.find((c) => c.cmdline?.includes(command))?.pid;
}

/**
 * Kills the launcher's child `name` (found by `command` in its command line) with SIGKILL, waits
 * for the launcher to say it restarts it and that it is healthy again, and answers the new pid.
 */
async function killAndAwaitRestart(name: string, command: string, restartMs: number): Promise<number> {
  const before = pidRunning(command);
  expect(before).toBeDefined();
  process.kill(before!, 'SIGKILL');
  await waitForOutput(new RegExp(`${name} was killed by SIGKILL; restarting it in \\d+ ms`), 10_000);
  await waitForOutput(new RegExp(`${name} restarted and healthy`), restartMs);
  const after = pidRunning(command);
  expect(after).toBeDefined();
  expect(after).not.toBe(before);
  expect(() => process.kill(after!, 0)).not.toThrow();
  return after!;
}

const adminToken = randomBytes(32).toString('base64url');
/** The Postgres the launcher started again (set by its test). */
let postgresPid: number | undefined;

const gateway = () => /Gateway {6}(http:\/\/\S+)/.exec(output)![1]!.replace('localhost', '127.0.0.1');
const ready = async () => {
  const res = await fetch(`${gateway()}/health/ready`).catch(() => undefined);
  return res?.status === 200 ? ((await res.json()) as { checks: Record<string, string> }) : undefined;
};

beforeAll(async () => {
  // Without NATS_URL and DATABASE_URL: the launcher starts a nats-server (NATS_SERVER_BIN, from
  // the test run) and a Postgres cluster of its own (the checkout's .data/postgres, or a
  // throwaway one while another launcher, such as this test run's, holds it).
  const { NATS_URL: _nats, DATABASE_URL: _database, PG_PORT: _port, ...env } = process.env;
  launcher = spawn(process.execPath, ['scripts/platform.mjs', 'start'], {
    cwd: REPO_ROOT,
    env: { ...env, PLATFORM_SKIP_BUILD: '1', HOST: '127.0.0.1', LOG_LEVEL: 'warn', NO_COLOR: '1', BILLING_ADMIN_TOKEN: adminToken },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  launcher.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  launcher.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  await waitForOutput(/Admin token/, 180_000);
}, 210_000);

afterAll(async () => {
  if (launcher && launcher.exitCode === null) {
    launcher.kill('SIGINT');
    await new Promise((r) => launcher.once('exit', r));
  }
}, 60_000);

describe('npm start', () => {
  it('says where the admin token is without printing it', () => {
    expect(output).toMatch(/Admin token {2}BILLING_ADMIN_TOKEN \(as given\)/);
    expect(output).not.toContain(adminToken);
  });

  it("names each service's operations listener, which answers /metrics there", async () => {
    for (const name of ['sandbox-provider', 'identity', 'billing', 'checkout', 'webhooks', 'gateway']) {
      const m = new RegExp(`\\n  ${name} +\\S+ +metrics (http://localhost:\\d+/metrics)`).exec(output);
      expect(m, name).not.toBeNull();
      const res = await fetch(m![1]!.replace('localhost', '127.0.0.1'));
      expect(res.status, name).toBe(200);
      expect(await res.text(), name).toContain('# TYPE');
    }
  });

  it('restarts its own nats-server killed with SIGKILL, and the services reconnect to it', async () => {
    await killAndAwaitRestart('nats-server', 'nats-server', 60_000);
    // The gateway's readiness includes its NATS connection (and the services' health).
    const report = await eventually(ready, 30_000, 250);
    expect(report?.checks).toMatchObject({ nats: 'ok' });
  }, 120_000);

  it('restarts its embedded Postgres killed with SIGKILL, and the services write to it again', async () => {
    const after = await killAndAwaitRestart('postgres', 'bin/postgres', 90_000);
    // Every service's pool reconnects: readiness (each service's database check) and a write
    // that goes through the gateway to billing's schema and out as an event.
    const report = await eventually(ready, 60_000, 250);
    expect(report?.checks).toMatchObject({ postgres: 'ok', billing: 'ok', identity: 'ok', checkout: 'ok', webhooks: 'ok' });
    const created = await eventually(
      async () => {
        const res = await fetch(`${gateway()}/api/admin/merchants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'After the restart', contactEmail: 'after-restart@example.com' }),
        });
        return res.status === 201 ? ((await res.json()) as { id: string }) : undefined;
      },
      30_000,
      250,
    );
    expect(created?.id).toMatch(/^[0-9a-f-]{36}$/);
    postgresPid = after;
  }, 150_000);

  it('restarts a service killed with SIGKILL, and stops everything on Ctrl-C', async () => {
    const after = await killAndAwaitRestart('billing', 'services/billing/dist/main.js', 60_000);

    const exited = new Promise<number | null>((r) => launcher.once('exit', (code) => r(code)));
    launcher.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(() => process.kill(after!, 0)).toThrow();
    // The Postgres it started again is stopped too.
    expect(postgresPid).toBeDefined();
    expect(() => process.kill(postgresPid!, 0)).toThrow();
  }, 120_000);
});
