import type { Socket } from 'node:net';
import type { Server } from 'node:http';
import { DomainError } from '@billing/contracts';
import { addressBlockOf } from '@billing/service-runtime';
import { recordRateLimitRejection } from '@billing/telemetry';
import { rawProblemResponse } from './server.js';

/** HTTP_MAX_CONNECTIONS_PER_IP when absent (and TRUST_PROXY is not set). */
export const DEFAULT_MAX_CONNECTIONS_PER_IP = 256;

/** How long a refused connection may stay open to read its 429 before it is destroyed. */
const REFUSED_LINGER_MS = 1000;

/**
 * Caps the connections one client address may hold open at once on `server`
 * (HTTP_MAX_CONNECTIONS_PER_IP): a further connection is answered 429 (problem details, with
 * `Retry-After`) and closed before any request on it is parsed, so one client cannot take the
 * file descriptors and memory every other client needs. Counted per socket address: behind a
 * proxy that is the proxy's (with TRUST_PROXY set the cap is off unless given). `max` 0
 * turns it off. Must run before the server listens: it wraps the server's own connection
 * listener, so a refused socket never reaches the HTTP parser.
 */
export function capConnectionsPerAddress(server: Server, max: number): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  const accept = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    // An IPv6 client counts as its /64, an IPv4-mapped address as its IPv4 address.
    const key = addressBlockOf(socket.remoteAddress);
    const n = open.get(key) ?? 0;
    if (n >= max) {
      refuse(socket, max);
      return;
    }
    open.set(key, n + 1);
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    });
    for (const listener of accept) listener.call(server, socket);
  });
}

function refuse(socket: Socket, max: number): void {
  recordRateLimitRejection('connections');
  socket.on('error', () => socket.destroy());
  const e = new DomainError('rate_limited', `Too many open connections from this address (at most ${max}); reuse or close connections, then retry.`);
  socket.end(rawProblemResponse(e, 429, { 'Retry-After': '1' }));
  // A client that never reads or closes its end does not keep the refused socket.
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
}
