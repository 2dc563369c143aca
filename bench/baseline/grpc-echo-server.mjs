// Baseline peer: a bare gRPC server answering Check() of the standard health service, i.e. the
// cheapest possible unary call, loaded from the same proto with the same loader options.
// ECHO_TLS_DIR: serve mutual TLS with that directory's `ca.crt` and `billing.crt`/`.key`.
import fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../proto');
const def = protoLoader.loadSync(path.join(root, 'grpc/health/v1/health.proto'), { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true });
const { Health } = grpc.loadPackageDefinition(def).grpc.health.v1;
const server = new grpc.Server();
server.addService(Health.service, { Check: (_call, cb) => cb(null, { status: 'SERVING' }), Watch: () => undefined });
const tls = process.env.ECHO_TLS_DIR;
const read = (f) => fs.readFileSync(path.join(tls, f));
const credentials = tls
  ? grpc.ServerCredentials.createSsl(read('ca.crt'), [{ cert_chain: read('billing.crt'), private_key: read('billing.key') }], true)
  : grpc.ServerCredentials.createInsecure();
server.bindAsync('127.0.0.1:0', credentials, (err, port) => {
  if (err) throw err;
  process.stdout.write(`PORT ${port}\n`);
});
process.on('SIGTERM', () => server.forceShutdown() || process.exit(0));
