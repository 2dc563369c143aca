#!/usr/bin/env node
// Container health check: exits 0 when the service answers its health check.
//   node scripts/healthcheck.mjs grpc 127.0.0.1:50051
//   node scripts/healthcheck.mjs http http://127.0.0.1:8080/health
// A gRPC check presents the container's own certificate (GRPC_TLS_CA/CERT/KEY) when it has one.
import { checkGrpcHealth, checkHttpHealth } from './lib/health.mjs';

const [kind, target] = process.argv.slice(2);
if (!target || (kind !== 'grpc' && kind !== 'http')) {
  console.error('usage: healthcheck.mjs grpc <host:port> | http <url>');
  process.exit(2);
}
const healthy = kind === 'grpc' ? await checkGrpcHealth(target, { timeoutMs: 3000, tls: process.env, serverName: process.env.SERVICE }) : await checkHttpHealth(target, { timeoutMs: 3000 });
process.exit(healthy ? 0 : 1);
