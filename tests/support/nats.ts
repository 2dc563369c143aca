import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findNatsServer, startNatsServer } from '../../scripts/lib/nats.mjs';

/** A NATS server with JetStream for tests. */
export interface TestNats {
  /** NATS_URL of the server: a private one's carries its user and password (`nats://platform:<password>@127.0.0.1:<port>`). */
  url: string;
  /** False when running against the shared server in NATS_URL (no nats-server binary found). */
  private: boolean;
  /** Server output lines, oldest first (empty for a shared server). */
  logs: string[];
  /** Stops the server and starts it again on the same port and store: streams survive. */
  restart(): Promise<void>;
  /** Stops the server (without restarting) to test how clients cope; `restart()` brings it back. */
  kill(): Promise<void>;
  /** Stops the server and deletes its store. */
  stop(): Promise<void>;
}

/**
 * Starts a private `nats-server -js` (NATS_SERVER_BIN, or found on PATH) on a free port with a
 * temporary store directory, requiring a password of its own (`startNatsServer`). Without a binary, falls back to the server in NATS_URL, which
 * cannot be restarted.
 */
export async function startTestNats(): Promise<TestNats> {
  const bin = findNatsServer();
  if (!bin) {
    const url = process.env.NATS_URL;
    if (!url) throw new Error('no nats-server binary (set NATS_SERVER_BIN or put it on PATH) and NATS_URL is not set');
    const refuse = async () => {
      throw new Error(`cannot restart or stop the shared NATS server at ${url}; install nats-server for a private one`);
    };
    return { url, private: false, logs: [], restart: refuse, kill: refuse, stop: async () => {} };
  }
  const storeDir = mkdtempSync(join(tmpdir(), 'bp-test-nats-'));
  try {
    const server = await startNatsServer({ bin, storeDir });
    return {
      url: server.url,
      private: true,
      logs: server.logs,
      restart: server.restart,
      kill: server.stop,
      async stop() {
        await server.stop();
        rmSync(storeDir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    rmSync(storeDir, { recursive: true, force: true });
    throw e;
  }
}
