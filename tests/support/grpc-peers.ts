import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureGrpcCertificates } from '../../scripts/lib/grpc-certs.mjs';

type TransportConfig = { PLATFORM_MODE: 'test'; GRPC_TLS_CA: string; GRPC_TLS_CERT: string; GRPC_TLS_KEY: string } & Record<string, unknown>;

/**
 * Certificates of the platform's authority for `peers`, in a directory of their own, and `as`,
 * which makes this process that peer (server and client credentials alike) with `extra` settings.
 * `configure` is the test's own `configureGrpcTransport` (the module under test, not the built
 * package: the transport is per module instance).
 */
export function grpcTestPeers(configure: (config: TransportConfig) => void, prefix: string, peers: string[], extra: Record<string, unknown> = {}) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  ensureGrpcCertificates(dir, peers);
  return {
    as: (peer: string) => configure({ PLATFORM_MODE: 'test', GRPC_TLS_CA: join(dir, 'ca.crt'), GRPC_TLS_CERT: join(dir, `${peer}.crt`), GRPC_TLS_KEY: join(dir, `${peer}.key`), ...extra }),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
