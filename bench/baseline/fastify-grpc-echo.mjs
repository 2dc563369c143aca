// Baseline front: bare fastify forwarding each request as one gRPC unary call (no auth, no
// validation, no database) — the floor any gateway → gRPC path can reach on this machine.
// ECHO_TLS_DIR: call over mutual TLS as the gateway (`ca.crt`, `gateway.crt`/`.key` there).
import fs from 'node:fs';
import Fastify from 'fastify';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../proto');
const def = protoLoader.loadSync(path.join(root, 'grpc/health/v1/health.proto'), { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true });
const { Health } = grpc.loadPackageDefinition(def).grpc.health.v1;
const tls = process.env.ECHO_TLS_DIR;
const read = (f) => fs.readFileSync(path.join(tls, f));
const client = tls
  ? new Health(process.env.ECHO_GRPC_ADDRESS, grpc.credentials.createSsl(read('ca.crt'), read('gateway.key'), read('gateway.crt')), { 'grpc.ssl_target_name_override': 'billing' })
  : new Health(process.env.ECHO_GRPC_ADDRESS, grpc.credentials.createInsecure());
const app = Fastify();
app.get('/echo', (_req, reply) => {
  client.Check({ service: '' }, { deadline: new Date(Date.now() + 5000) }, (err, res) => (err ? reply.code(503).send({ error: err.message }) : reply.send(res)));
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`PORT ${app.server.address().port}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
