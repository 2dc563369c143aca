// TCP port selection. A port is "free" when this process can bind it on every interface; the
// chosen port is only reserved within this process, so callers retry if a bind still races.
import { connect, createServer } from 'node:net';

/** Ports handed out by this process, so two services in one launch never get the same one. */
const HANDED_OUT = new Set();

/**
 * @param {number} port
 * @returns {Promise<boolean>}
 */
export function isPortFree(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    // 0.0.0.0 conflicts with a listener on any IPv4 address, including 127.0.0.1.
    server.listen({ port, host: '0.0.0.0', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** @returns {Promise<number>} a port the OS considers free right now */
function ephemeralPort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ port: 0, host: '0.0.0.0', exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A free port: `preferred` when it is free, otherwise one chosen by the OS.
 * @param {number} [preferred]
 * @returns {Promise<number>}
 */
export async function findFreePort(preferred) {
  if (preferred && !HANDED_OUT.has(preferred) && (await isPortFree(preferred))) {
    HANDED_OUT.add(preferred);
    return preferred;
  }
  for (;;) {
    const port = await ephemeralPort();
    if (!HANDED_OUT.has(port)) {
      HANDED_OUT.add(port);
      return port;
    }
  }
}

/**
 * True when something accepts TCP connections on host:port.
 * @param {string} host
 * @param {number} port
 * @param {number} [timeoutMs]
 * @returns {Promise<boolean>}
 */
export function canConnect(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (/** @type {boolean} */ ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
