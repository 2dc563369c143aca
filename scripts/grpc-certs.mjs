#!/usr/bin/env node
// Creates (or completes) an installation's gRPC certificate authority and service certificates.
//   node scripts/grpc-certs.mjs <dir>                      everything in <dir> (as the launcher does)
//   node scripts/grpc-certs.mjs <dir> <service>=<out> ...  also copy each service's own bundle
//                                                          (ca.crt, tls.crt, tls.key) to <out>
// The second form is what docker-compose runs: the authority's key stays in <dir>, mounted in
// no service, and each service's volume holds only its own key.
import fs from 'node:fs';
import path from 'node:path';
import { ensureGrpcCertificates, GRPC_PEERS } from './lib/grpc-certs.mjs';

const [dir, ...bundles] = process.argv.slice(2);
if (!dir || bundles.some((b) => !/^[a-z-]+=.+/.test(b))) {
  console.error('usage: grpc-certs.mjs <dir> [<service>=<out dir> ...]');
  process.exit(2);
}
const certs = ensureGrpcCertificates(path.resolve(dir));
for (const bundle of bundles) {
  const [peer, out] = /** @type {[string, string]} */ (bundle.split(/=(.*)/s, 2));
  if (!GRPC_PEERS.includes(peer)) {
    console.error(`unknown service ${peer}; known: ${GRPC_PEERS.join(', ')}`);
    process.exit(2);
  }
  const env = certs.envFor(peer);
  fs.mkdirSync(out, { recursive: true });
  fs.copyFileSync(env.GRPC_TLS_CA, path.join(out, 'ca.crt'));
  fs.copyFileSync(env.GRPC_TLS_CERT, path.join(out, 'tls.crt'));
  fs.copyFileSync(env.GRPC_TLS_KEY, path.join(out, 'tls.key'));
  fs.chmodSync(path.join(out, 'tls.key'), 0o600);
}
console.log(`gRPC certificates in ${certs.dir}${bundles.length ? `; bundles: ${bundles.join(', ')}` : ''}`);
