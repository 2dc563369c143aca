// Readiness checks: grpc.health.v1.Health/Check for gRPC services, GET for HTTP ones.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { canConnect } from './ports.mjs';

const HEALTH_PROTO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../proto/grpc/health/v1/health.proto');

/** @type {Promise<any> | undefined} */
let healthClientCtor;

/** The generated Health client, or null when @grpc/grpc-js is not installed. */
function loadHealthClient() {
  healthClientCtor ??= (async () => {
    try {
      const grpc = await import('@grpc/grpc-js');
      const loader = await import('@grpc/proto-loader');
      const def = loader.loadSync(HEALTH_PROTO, { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true });
      /** @type {any} */
      const pkg = grpc.loadPackageDefinition(def);
      return { grpc, Health: pkg.grpc.health.v1.Health };
    } catch {
      return null;
    }
  })();
  return healthClientCtor;
}

/**
 * True when the gRPC server at `address` (`host:port`) reports SERVING for `service` ('' is
 * the server as a whole). Without @grpc/grpc-js, true when the port accepts connections.
 * `tls`: paths of the authority and of a client certificate and key of the installation (the
 * services require one); plaintext without.
 * @param {string} address
 * @param {{ service?: string, timeoutMs?: number, serverName?: string, tls?: { GRPC_TLS_CA?: string, GRPC_TLS_CERT?: string, GRPC_TLS_KEY?: string } }} [opts]
 * @returns {Promise<boolean>}
 */
export async function checkGrpcHealth(address, opts = {}) {
  const loaded = await loadHealthClient();
  if (!loaded) {
    const i = address.lastIndexOf(':');
    return canConnect(address.slice(0, i), Number(address.slice(i + 1)), opts.timeoutMs);
  }
  const { GRPC_TLS_CA: ca, GRPC_TLS_CERT: cert, GRPC_TLS_KEY: key } = opts.tls ?? {};
  const secure = Boolean(ca && cert && key);
  const credentials = secure
    ? loaded.grpc.credentials.createSsl(fs.readFileSync(/** @type {string} */ (ca)), fs.readFileSync(/** @type {string} */ (key)), fs.readFileSync(/** @type {string} */ (cert)))
    : loaded.grpc.credentials.createInsecure();
  // The server's certificate must name the service (`serverName`), as the services' clients check.
  const names = secure && opts.serverName ? { 'grpc.ssl_target_name_override': opts.serverName, 'grpc.default_authority': opts.serverName } : {};
  const client = new loaded.Health(address, credentials, names);
  try {
    return await new Promise((resolve) => {
      const deadline = new Date(Date.now() + (opts.timeoutMs ?? 1000));
      client.Check({ service: opts.service ?? '' }, { deadline }, (/** @type {unknown} */ err, /** @type {{ status?: string }} */ res) =>
        resolve(!err && res?.status === 'SERVING'),
      );
    });
  } finally {
    client.close();
  }
}

/**
 * True when GET `url` answers 2xx.
 * @param {string} url
 * @param {{ timeoutMs?: number }} [opts]
 * @returns {Promise<boolean>}
 */
export async function checkHttpHealth(url, opts = {}) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(opts.timeoutMs ?? 2000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * Whether process `pid` itself has a socket listening on TCP `port` (Linux: its open sockets'
 * inodes against `/proc/net/tcp{,6}`); undefined where `/proc` cannot tell. A health check alone
 * cannot tell: when another program took the port between the launcher's check and the
 * service's bind, that program answers the check (another platform's sandbox answered
 * `/health` while ours was failing with EADDRINUSE, and the launcher took ours for ready).
 * @param {number} pid
 * @param {number} port
 * @returns {boolean | undefined}
 */
export function listensOn(pid, port) {
  let inodes;
  try {
    inodes = new Set(
      fs
        .readdirSync(`/proc/${pid}/fd`)
        .map((fd) => {
          try {
            return /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
          } catch {
            return undefined; // closed meanwhile
          }
        })
        .filter(Boolean),
    );
  } catch {
    // Where /proc exists, a process whose descriptors cannot be read has exited (or is not
    // ours): it listens on nothing. Elsewhere nothing can be told.
    return fs.existsSync('/proc/self/fd') ? false : undefined;
  }
  // No socket at all listens on nothing. So is an exited process not yet reaped (a zombie): its
  // descriptors are gone and its network tables cannot be read, which read as "cannot tell" let
  // a service that had just died with EADDRINUSE pass for ready while a stranger answered its
  // health check (launcher-ports failed so in CI).
  if (inodes.size === 0) return false;
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  let readAny = false;
  for (const table of ['tcp', 'tcp6']) {
    let text;
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    readAny = true;
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 the socket's inode.
      if (f.length > 9 && f[1].endsWith(`:${portHex}`) && f[3] === '0A' && inodes.has(f[9])) return true;
    }
  }
  return readAny || fs.existsSync('/proc/self/net/tcp') ? false : undefined;
}
