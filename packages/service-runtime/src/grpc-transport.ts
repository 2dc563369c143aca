import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { TLSSocket } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { z } from 'zod';
import type { PlatformMode } from './config.js';

/**
 * The services that hold a certificate of the installation's authority. A peer is known by its
 * certificate's subject common name, which is its service name.
 */
export const GRPC_PEERS = ['identity', 'billing', 'checkout', 'webhooks', 'gateway'] as const;
export type GrpcPeer = (typeof GRPC_PEERS)[number];

/**
 * Mutual TLS material of this process (PEM files): the installation's authority, which every
 * peer's certificate must be signed by, and this service's own certificate and key. All three
 * or none; without them gRPC runs in plaintext and no call is authorised.
 */
/** `GRPC_RECONNECT_BACKOFF_MAX_MS` when not set. */
const DEFAULT_RECONNECT_BACKOFF_MAX_MS = 1000;
const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export const GrpcTlsConfig = z.object({
  GRPC_TLS_CA: z.string().min(1).optional(),
  GRPC_TLS_CERT: z.string().min(1).optional(),
  GRPC_TLS_KEY: z.string().min(1).optional(),
  /**
   * Longest wait between a client's attempts to reconnect to a server it cannot reach. grpc-js's
   * own (120 s, growing from 1 s by 1.6 per attempt) left a caller failing fast with UNAVAILABLE
   * for seconds after a restarted service was back; reconnecting to a refused port is cheap.
   */
  GRPC_RECONNECT_BACKOFF_MAX_MS: z.coerce.number().int().min(100).max(120_000).default(DEFAULT_RECONNECT_BACKOFF_MAX_MS),
  /**
   * Largest gRPC message a server or client of this process accepts (grpc-js's default, 4 MiB).
   * A gathered call carries the requests of one event-loop turn in one message, so a deployment
   * that raises the gateway's body limits for its own tools raises this with them.
   */
  GRPC_MAX_MESSAGE_BYTES: z.coerce.number().int().min(65_536).max(268_435_456).default(DEFAULT_MAX_MESSAGE_BYTES),
});
export type GrpcTlsConfig = z.input<typeof GrpcTlsConfig>;

interface Transport {
  mode: PlatformMode | undefined;
  server: grpc.ServerCredentials;
  client: grpc.ChannelCredentials;
  secure: boolean;
}

/** The first reconnect waits this long at most; later ones grow by 1.6 up to the configured cap. */
const INITIAL_RECONNECT_BACKOFF_MS = 200;
let reconnectBackoffMaxMs = DEFAULT_RECONNECT_BACKOFF_MAX_MS;
let maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;

/** The largest message every gRPC server and client of this process receives (GRPC_MAX_MESSAGE_BYTES). */
export function maxMessageBytesOption(): number {
  return maxMessageBytes;
}

/** Reconnect backoff of every client channel (see GRPC_RECONNECT_BACKOFF_MAX_MS). */
export function reconnectOptions(): grpc.ChannelOptions {
  return {
    'grpc.initial_reconnect_backoff_ms': Math.min(INITIAL_RECONNECT_BACKOFF_MS, reconnectBackoffMaxMs),
    'grpc.max_reconnect_backoff_ms': reconnectBackoffMaxMs,
    'grpc.max_receive_message_length': maxMessageBytes,
  };
}

const INSECURE: Transport = { mode: undefined, server: grpc.ServerCredentials.createInsecure(), client: grpc.credentials.createInsecure(), secure: false };
let transport: Transport = INSECURE;

function readPem(variable: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new Error(`${variable}: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}

/**
 * Sets the credentials every gRPC server (`listen`) and client (`createClient`) of this process
 * uses, from its parsed config. Call once at start-up, before listening or creating clients;
 * with the address the service will listen on and the addresses it will call, it refuses at
 * once (before any other start-up work) when production would serve or call one of them in
 * plaintext off loopback. A refusal, or TLS files
 * that cannot be read or are not all given, exits with status 78 and the reason. One credentials object is
 * shared by every client, so clients of one target share one connection (grpc-js pools
 * subchannels by target, options and credentials).
 */
export function configureGrpcTransport(config: GrpcTlsConfig & { PLATFORM_MODE: PlatformMode }, listenAddress?: string, callAddresses: readonly string[] = []): void {
  try {
    setTransport(config);
    if (listenAddress !== undefined) refuseInsecureOutsideLoopback(listenAddress, 'serve gRPC on');
    for (const address of callAddresses) refuseInsecureOutsideLoopback(address, 'call gRPC at');
  } catch (e) {
    // A setting to fix, like any other invalid configuration: its message and status 78, not a stack trace.
    process.stderr.write(`Invalid configuration:\n  ${(e as Error).message}\n`);
    process.exit(78);
  }
}

function setTransport(config: GrpcTlsConfig & { PLATFORM_MODE: PlatformMode }): void {
  reconnectBackoffMaxMs = Number(config.GRPC_RECONNECT_BACKOFF_MAX_MS ?? DEFAULT_RECONNECT_BACKOFF_MAX_MS);
  maxMessageBytes = Number(config.GRPC_MAX_MESSAGE_BYTES ?? DEFAULT_MAX_MESSAGE_BYTES);
  const { GRPC_TLS_CA: ca, GRPC_TLS_CERT: cert, GRPC_TLS_KEY: key } = config;
  const given = [ca, cert, key].filter(Boolean).length;
  if (given === 0) {
    transport = { ...INSECURE, mode: config.PLATFORM_MODE };
    return;
  }
  if (given !== 3) throw new Error('GRPC_TLS_CA, GRPC_TLS_CERT and GRPC_TLS_KEY must be set together');
  const caPem = readPem('GRPC_TLS_CA', ca!);
  const certPem = readPem('GRPC_TLS_CERT', cert!);
  const keyPem = readPem('GRPC_TLS_KEY', key!);
  transport = {
    mode: config.PLATFORM_MODE,
    // `true`: a peer without a certificate of the authority is refused during the handshake.
    server: grpc.ServerCredentials.createSsl(caPem, [{ cert_chain: certPem, private_key: keyPem }], true),
    client: grpc.credentials.createSsl(caPem, keyPem, certPem),
    secure: true,
  };
}

function hostOf(address: string): string {
  const target = address.replace(/^dns:(\/\/[^/]*\/)?/, '');
  if (target.startsWith('[')) return target.slice(1, target.indexOf(']'));
  const colons = target.split(':').length - 1;
  return colons === 1 ? target.slice(0, target.lastIndexOf(':')) : target;
}

/** True for `localhost`, 127.0.0.0/8 and ::1 (with or without a port). */
export function isLoopbackAddress(address: string): boolean {
  const host = hostOf(address).toLowerCase();
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '0:0:0:0:0:0:0:1';
}

function refuseInsecureOutsideLoopback(address: string, what: string): void {
  if (transport.secure || transport.mode !== 'production' || isLoopbackAddress(address)) return;
  throw new Error(
    `refusing to ${what} ${address} without TLS in production mode: set GRPC_TLS_CA, GRPC_TLS_CERT and GRPC_TLS_KEY (or use a loopback address)`,
  );
}

/** Credentials for serving on `address`; throws in production when they would be plaintext off loopback. */
export function serverCredentialsFor(address: string): grpc.ServerCredentials {
  refuseInsecureOutsideLoopback(address, 'serve gRPC on');
  return transport.server;
}

/** Credentials for calling `address`; throws in production when they would be plaintext off loopback. */
export function clientCredentialsFor(address: string): grpc.ChannelCredentials {
  refuseInsecureOutsideLoopback(address, 'call gRPC at');
  return transport.client;
}

/**
 * Channel options that make a client check the server's certificate names `service` (the
 * first part of the service's proto package, e.g. `identity`), rather than the host it dialled:
 * a certificate of another service is refused even at the right address.
 */
export function serverNameOptions(service: string): grpc.ChannelOptions {
  return transport.secure ? { 'grpc.ssl_target_name_override': service, 'grpc.default_authority': service } : {};
}

/** The caller of each verified TLS connection: its certificate cannot change after the handshake. */
const callerOfSocket = new WeakMap<TLSSocket, string | undefined>();

/** The one subject CN of a peer certificate; undefined when missing or ambiguous. */
function commonNameOf(cert: { subject?: { CN?: string | string[] } } | undefined): string | undefined {
  const cn = cert?.subject?.CN;
  return Array.isArray(cn) ? undefined : cn || undefined;
}

/** The caller named by a connection's verified peer certificate; undefined when unverified. */
function callerFromCertificate(socket: TLSSocket): string | undefined {
  return socket.authorized ? commonNameOf(socket.getPeerCertificate()) : undefined;
}

/**
 * The service that made a call, from the certificate it presented and the server verified
 * against the authority; undefined on a plaintext connection. Never from metadata, which the
 * caller writes.
 *
 * Reading the certificate parses it (about a tenth of a service's CPU per call when done on
 * every call), so the answer is kept per TLS connection. grpc-js offers no per-connection hook,
 * so the connection is found through its call internals; if they are not where expected the
 * answer is computed from the auth context on every call instead, with the same result.
 */
export function callerOf(call: grpc.ServerUnaryCall<unknown, unknown>): string | undefined {
  const socket = tlsConnectionOf(call);
  if (socket) {
    if (!callerOfSocket.has(socket)) callerOfSocket.set(socket, callerFromCertificate(socket));
    return callerOfSocket.get(socket);
  }
  const auth = call.getAuthContext();
  return auth?.transportSecurityType === 'ssl' ? commonNameOf(auth.sslPeerCertificate) : undefined;
}

/** The TLS connection a call arrived on, through grpc-js's call internals; undefined if not found. */
export function tlsConnectionOf(call: grpc.ServerUnaryCall<unknown, unknown>): TLSSocket | undefined {
  const socket = (call as unknown as { call?: { stream?: { session?: { socket?: unknown } } } }).call?.stream?.session?.socket;
  return socket instanceof TLSSocket ? socket : undefined;
}
