import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer } from '../../../scripts/lib/nats.mjs';
import { natsDependency, type Dependency } from './health.js';

const bin = findNatsServer();
let server: Awaited<ReturnType<typeof startNatsServer>>;
let storeDir: string;
let nats: Dependency;

beforeAll(async () => {
  if (!bin) return;
  storeDir = mkdtempSync(join(tmpdir(), 'bp-health-nats-'));
  server = await startNatsServer({ bin, storeDir });
  nats = natsDependency(server.url, 'health-test');
}, 60_000);

afterAll(async () => {
  await nats?.close?.();
  const pid = server?.pid();
  if (pid) process.kill(pid, 'SIGCONT');
  await server?.stop();
  if (storeDir) rmSync(storeDir, { recursive: true, force: true });
});

/** Resolves with the probe's outcome once it equals `want` ('ok' or an error message), polling until `ms`. */
async function probeUntil(want: (outcome: string) => boolean, ms: number): Promise<string> {
  const end = Date.now() + ms;
  for (;;) {
    const outcome = await nats.probe().then(() => 'ok', (e: Error) => e.message);
    if (want(outcome) || Date.now() > end) return outcome;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(!bin)('readiness of NATS', () => {
  // A NATS that stopped answering without closing its connections (hung, or cut off by the
  // network) read "ok" for minutes: only a closed connection counted, and nats.js pings every two minutes.
  it('is not ready within seconds of the server no longer answering, and ready again once it answers', async () => {
    expect(await probeUntil((o) => o === 'ok', 10_000)).toBe('ok');
    process.kill(server.pid()!, 'SIGSTOP');
    const started = Date.now();
    expect(await probeUntil((o) => o !== 'ok', 8_000)).toBe('not connected');
    expect(Date.now() - started).toBeLessThan(6_000);
    process.kill(server.pid()!, 'SIGCONT');
    expect(await probeUntil((o) => o === 'ok', 10_000)).toBe('ok');
  }, 40_000);
});
