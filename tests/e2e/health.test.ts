import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { REPO_ROOT } from '../../scripts/lib/start-platform.mjs';
import { gateway } from '../support/e2e.js';

const http = gateway();

describe('gateway health and routing', () => {
  it('answers GET /health with 200', async () => {
    const res = await http('GET', '/health');
    expect(res.status).toBe(200);
  });

  it('answers an unknown route with 404 problem details', async () => {
    const res = await http('GET', '/api/does-not-exist');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 404 });
  });
});

describe('a gateway started on its own', () => {
  it('logs the port it listens on when PORT=0 lets the system pick one (it logged port 0)', async () => {
    const child = spawn(process.execPath, [path.join(REPO_ROOT, 'services', 'gateway', 'dist', 'main.js')], {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        PLATFORM_MODE: 'test',
        LOG_LEVEL: 'info',
        DATABASE_URL: inject('databaseUrl'),
        NATS_URL: inject('natsUrl'),
        BILLING_ADMIN_TOKEN: randomBytes(32).toString('base64'),
        PORT: '0',
        METRICS_PORT: '0',
        // Liveness needs no backend; nothing listens here, so it calls no other platform's services.
        IDENTITY_GRPC_URL: '127.0.0.1:1',
        BILLING_GRPC_URL: '127.0.0.1:1',
        CHECKOUT_GRPC_URL: '127.0.0.1:1',
        WEBHOOKS_GRPC_URL: '127.0.0.1:1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`no 'gateway listening' line in:\n${out}`)), 30_000);
        child.on('exit', (code) => reject(new Error(`gateway exited with ${code}:\n${out}`)));
        child.stderr.on('data', (d) => (out += d));
        child.stdout.on('data', (d) => {
          out += d;
          const line = out.split('\n').find((l) => l.includes('"msg":"gateway listening"'));
          if (!line) return;
          clearTimeout(timer);
          resolve(JSON.parse(line).port);
        });
      });
      expect(port).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    } finally {
      child.kill('SIGKILL');
    }
  }, 40_000);
});
