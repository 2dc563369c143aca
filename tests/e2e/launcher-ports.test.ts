import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { listensOn } from '../../scripts/lib/health.mjs';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { startTestPlatform } from '../support/platform.js';

/**
 * Regression: `npm start` aborted ("sandbox-provider exited with code 1 while the platform was
 * starting") when another platform's sandbox took port 8090 between the launcher's check and
 * our sandbox's bind: the other sandbox answered our health check, the launcher took ours for
 * ready, and ours then died with EADDRINUSE. A service is ready only while its own process
 * listens on its port.
 */
/** The environment variable `name` of process `pid`. */
const envOf = (pid: number, name: string) => fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((v) => v.startsWith(`${name}=`));

/** Takes, with a stranger listening on it before the process binds it, the port the process was given in `variable`; answers that port. */
function takePortOf(pid: number, variable: string, strangers: net.Server[]): number {
  const port = Number(envOf(pid, variable)!.split('=')[1]);
  const stranger = net.createServer();
  strangers.push(stranger);
  stranger.listen(port, '127.0.0.1');
  return port;
}

const servers: Server[] = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

const listening = (server: Server | net.Server, port = 0) =>
  new Promise<number>((resolve) => server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));

it('tells whether a process itself listens on a port', async () => {
  const mine = net.createServer();
  const port = await listening(mine);
  try {
    expect(listensOn(process.pid, port)).toBe(true);
    expect(listensOn(process.pid, port === 65535 ? port - 1 : port + 1)).toBe(false);
    // A process that has exited listens on nothing: taking it for "cannot tell" let a service
    // that died with EADDRINUSE pass for ready while a stranger answered its health check.
    expect(listensOn(2 ** 22 + 1, port)).toBe(false);
    // Nor does one that has exited and is not reaped yet (a zombie: its parent, perl, never waits).
    const parent = spawn('perl', ['-e', '$| = 1; my $p = fork(); exit 0 if $p == 0; print "$p\\n"; sleep 5'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const zombie = Number((await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString())))).trim());
      await new Promise((r) => setTimeout(r, 200));
      expect(fs.readFileSync(`/proc/${zombie}/stat`, 'utf8')).toMatch(/^\d+ \(perl\) Z /);
      expect(listensOn(zombie, port)).toBe(false);
    } finally {
      parent.kill();
    }
  } finally {
    mine.close();
  }
});

it('does not take a foreign server answering on a service port for the service', async () => {
  // A stranger answering 200 on /health, on the port the sandbox provider (service 0) is given.
  const stranger = createServer((_req, res) => res.end('ok'));
  servers.push(stranger);
  const port = await listening(stranger);
  const started = startPlatform({
    databaseUrl: 'postgres://nobody@127.0.0.1:1/none',
    natsUrl: 'nats://127.0.0.1:1',
    services: ['sandbox-provider'],
    portBase: port,
    mode: 'test',
    logLevel: 'warn',
    startTimeoutMs: 20_000,
    stopGraceMs: 2_000,
  });
  // With the port given (portBase) it cannot move, so the start fails, naming the clash. (Taken
  // for started, it is stopped, so a failing run leaves no process behind.)
  const outcome = await started.then(
    async (platform: { stop(): Promise<void> }) => {
      await platform.stop();
      return new Error('started');
    },
    (e: Error) => e,
  );
  expect(outcome.message).toMatch(/EADDRINUSE/);
}, 40_000);

it("moves a service's operations listener when another process takes its METRICS_PORT before the service binds it (npm start stopped)", async () => {
  // The stranger takes the port the launcher chose for the sandbox's operations listener right
  // after the sandbox is spawned, before it binds: the race two launches on one machine run.
  const strangers: net.Server[] = [];
  let taken: number | undefined;
  const started = startPlatform({
    databaseUrl: 'postgres://nobody@127.0.0.1:1/none',
    natsUrl: 'nats://127.0.0.1:1',
    services: ['sandbox-provider'],
    mode: 'test',
    logLevel: 'warn',
    startTimeoutMs: 20_000,
    stopGraceMs: 2_000,
    onSpawn: (_name: string, pid: number) => {
      if (taken !== undefined) return;
      taken = takePortOf(pid, 'METRICS_PORT', strangers);
    },
  });
  try {
    const platform = await started;
    try {
      const metricsUrl = platform.processes['sandbox-provider']?.metricsUrl ?? '';
      expect(taken).toBeGreaterThan(0);
      expect(metricsUrl).not.toBe(`http://127.0.0.1:${taken}`);
      expect((await fetch(`${metricsUrl}/health/live`)).status).toBe(200);
    } finally {
      await platform.stop();
    }
  } finally {
    strangers.forEach((s) => s.close());
  }
}, 60_000);

it("restarts the services that link to the gateway when the gateway moves to another port (their links named a port it never got)", async () => {
  // The stranger takes the gateway's port after identity has started with PUBLIC_BASE_URL set to
  // it and before the gateway binds it: the gateway moves, so identity's email links must follow.
  const strangers: net.Server[] = [];
  let taken: number | undefined;
  const platform = await startTestPlatform({
    services: ['identity', 'gateway'],
    onSpawn: (name: string, pid: number) => {
      if (name !== 'gateway' || taken !== undefined) return;
      taken = takePortOf(pid, 'PORT', strangers);
    },
  });
  try {
    expect(taken).toBeGreaterThan(0);
    expect(platform.gatewayUrl).not.toBe(`http://127.0.0.1:${taken}`);
    expect(envOf(platform.processes.identity!.pid!, 'PUBLIC_BASE_URL')).toBe(`PUBLIC_BASE_URL=${platform.gatewayUrl}`);
  } finally {
    await platform.stop();
    strangers.forEach((s) => s.close());
  }
}, 120_000);
