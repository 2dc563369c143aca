// GET /api/Merchants/me with an API key: gateway → gRPC → billing → Postgres, beside a bare
// fastify → gRPC echo measured in the same run on the same machine (the ratio's base), and the
// same echo over the platform's gRPC mutual TLS, to show what the transport alone costs.
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
  const tlsEnv = { ECHO_TLS_DIR: platform.grpcCerts.dir };
  const tlsEcho = await spawnWithPort(path.join(here, 'baseline/grpc-echo-server.mjs'), tlsEnv);
  const tlsFront = await spawnWithPort(path.join(here, 'baseline/fastify-grpc-echo.mjs'), { ...tlsEnv, ECHO_GRPC_ADDRESS: `127.0.0.1:${tlsEcho.port}` });
  try {
    const baseline = await measure({ url: `http://127.0.0.1:${front.port}/echo`, connections, duration });
    const tlsBaseline = await measure({ url: `http://127.0.0.1:${tlsFront.port}/echo`, connections, duration });
    const real = await measure({ url: `${platform.gatewayUrl}/api/Merchants/me`, connections, duration, headers: { authorization: `Bearer ${key.key}` } });
    return [
      { name: 'baseline: fastify → gRPC echo', connections, ...baseline },
      { name: 'fastify → gRPC echo over mTLS', connections, ...tlsBaseline, ratio: tlsBaseline.rps / baseline.rps },
      { name: 'GET /api/Merchants/me (API key)', connections, ...real, ratio: real.rps / baseline.rps },
    ];
  } finally {
    for (const p of [tlsFront, tlsEcho, front, echo]) await p.stop();
  }
}
