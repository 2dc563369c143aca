// GET /api/Merchants/me with an API key: gateway → gRPC → billing → Postgres, beside a bare
// fastify → gRPC echo measured in the same run on the same machine.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { measure, spawnWithPort } from './load.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const name = 'GET /api/Merchants/me';

export async function run({ platform, connections = 64, duration = Number(process.env.BENCH_DURATION ?? 10) }) {
  const admin = { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' };
  const merchant = await (await fetch(`${platform.gatewayUrl}/api/admin/merchants`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'Bench Co', contactEmail: 'bench@example.com' }) })).json();
  const key = await (await fetch(`${platform.gatewayUrl}/api/admin/merchants/${merchant.id}/api-keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'bench' }) })).json();

  const echo = await spawnWithPort(path.join(here, 'baseline/grpc-echo-server.mjs'));
  const front = await spawnWithPort(path.join(here, 'baseline/fastify-grpc-echo.mjs'), { ECHO_GRPC_ADDRESS: `127.0.0.1:${echo.port}` });
  try {
    const baseline = await measure({ url: `http://127.0.0.1:${front.port}/echo`, connections, duration });
    const real = await measure({ url: `${platform.gatewayUrl}/api/Merchants/me`, connections, duration, headers: { authorization: `Bearer ${key.key}` } });
    return [
      { name: 'baseline: fastify → gRPC echo', connections, ...baseline },
      { name: 'GET /api/Merchants/me (API key)', connections, ...real, ratio: real.rps / baseline.rps },
    ];
  } finally {
    await front.stop();
    await echo.stop();
  }
}
