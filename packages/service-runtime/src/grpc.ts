import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { DomainError, ERROR_CODES, type ErrorCode } from '@billing/contracts';
import { SERVICE_FILES, type ServiceDefinitions, type ServiceName } from '@billing/proto-types';
import { context, currentTraceId, incomingContext, injectTraceHeaders, propagatesContextManually, recordRpcCall } from '@billing/telemetry';
import { callerOf, clientCredentialsFor, maxMessageBytesOption, reconnectOptions, serverCredentialsFor, serverNameOptions, type GrpcPeer } from './grpc-transport.js';
import type { Logger } from './logger.js';
import { databaseUnavailableError, invalidTextError } from './database.js';
import { SharedLookups } from './shared-lookups.js';

export { grpc };

/** The one set of proto-loader options every service and the gateway use. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

function findProtoRoot(): string {
  if (process.env.PROTO_ROOT) return resolve(process.env.PROTO_ROOT);
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, 'grpc/health/v1/health.proto'))) return candidate;
    dir = dirname(dir);
  }
  throw new Error('proto/ directory not found; set PROTO_ROOT');
}

export const PROTO_ROOT = findProtoRoot();

const packageCache = new Map<string, grpc.GrpcObject>();

/** Loads `proto/<relPath>` (e.g. `identity/v1/api_keys.proto`) once per process. */
export function loadProto(relPath: string): grpc.GrpcObject {
  let pkg = packageCache.get(relPath);
  if (!pkg) {
    const def = protoLoader.loadSync(join(PROTO_ROOT, relPath), { ...PROTO_LOADER_OPTIONS, includeDirs: [PROTO_ROOT] });
    pkg = grpc.loadPackageDefinition(def);
    packageCache.set(relPath, pkg);
  }
  return pkg;
}

/** Looks up `a.b.Service` in a loaded package. */
export function serviceDefinition(relPath: string, fullName: string): grpc.ServiceClientConstructor {
  let node: unknown = loadProto(relPath);
  for (const part of fullName.split('.')) node = (node as Record<string, unknown>)[part];
  if (!node) throw new Error(`gRPC service ${fullName} not found in ${relPath}`);
  return node as grpc.ServiceClientConstructor;
}

/**
 * grpc-js keeps channelz statistics (counters, timestamps and trace events per call, socket and
 * channel) unless told not to, at a measurable share of every call's CPU on both sides. Nothing
 * here serves the channelz service; the platform's own metrics count calls.
 */
const NO_CHANNELZ = { 'grpc.enable_channelz': 0 } as const;

/** Domain error code → gRPC status: the one table for every service's adapter. */
const GRPC_STATUS: Record<ErrorCode, grpc.status> = {
  validation_failed: grpc.status.INVALID_ARGUMENT,
  bad_request: grpc.status.INVALID_ARGUMENT,
  unauthenticated: grpc.status.UNAUTHENTICATED,
  forbidden: grpc.status.PERMISSION_DENIED,
  account_suspended: grpc.status.PERMISSION_DENIED,
  not_found: grpc.status.NOT_FOUND,
  merchant_not_found: grpc.status.NOT_FOUND,
  conflict: grpc.status.ALREADY_EXISTS,
  invalid_transition: grpc.status.FAILED_PRECONDITION,
  subscription_exists: grpc.status.ALREADY_EXISTS,
  idempotency_key_reused: grpc.status.ALREADY_EXISTS,
  idempotency_in_progress: grpc.status.ABORTED,
  idempotency_outcome_unknown: grpc.status.UNKNOWN,
  gone: grpc.status.FAILED_PRECONDITION,
  unprocessable: grpc.status.FAILED_PRECONDITION,
  account_locked: grpc.status.RESOURCE_EXHAUSTED,
  rate_limited: grpc.status.RESOURCE_EXHAUSTED,
  provider_unavailable: grpc.status.UNAVAILABLE,
  service_unavailable: grpc.status.UNAVAILABLE,
  delivery_failed: grpc.status.UNAVAILABLE,
  payload_too_large: grpc.status.INVALID_ARGUMENT,
  unsupported_media_type: grpc.status.INVALID_ARGUMENT,
  header_fields_too_large: grpc.status.INVALID_ARGUMENT,
  request_timeout: grpc.status.INVALID_ARGUMENT,
  internal: grpc.status.INTERNAL,
};

export const ERROR_CODE_KEY = 'error-code';
export const ERROR_EXTENSIONS_KEY = 'error-extensions-bin';

export function toGrpcError(e: DomainError): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  metadata.set(ERROR_CODE_KEY, e.code);
  if (Object.keys(e.extensions).length) metadata.set(ERROR_EXTENSIONS_KEY, Buffer.from(JSON.stringify(e.extensions)));
  return { code: GRPC_STATUS[e.code], details: e.message, metadata };
}

/** Detail of the 503 for a call that got no answer within its deadline. */
export const DEADLINE_EXCEEDED_DETAIL =
  'A backing service did not answer in time: a change this request asked for may or may not have been made. Check the resource before repeating the request.';

/**
 * Rebuilds the DomainError a service threw from a gRPC error, so a caller (the gateway or
 * another service) sees the same code. Transport failures become `service_unavailable`.
 */
export function fromGrpcError(err: grpc.ServiceError): DomainError {
  const raw = err.metadata?.get(ERROR_EXTENSIONS_KEY)[0];
  const known = rebuiltError(err.metadata?.get(ERROR_CODE_KEY)[0]?.toString(), err.details, raw === undefined ? undefined : raw.toString());
  if (known) return known;
  if (err.code === grpc.status.UNAVAILABLE) {
    return new DomainError('service_unavailable', 'A backing service is unavailable; retry shortly.', { retryAfterSeconds: 1 });
  }
  // The call went out and got no answer in time: the service may still have made the change (a
  // subscription created, a payment method added), so "retry" alone would invite a duplicate.
  if (err.code === grpc.status.DEADLINE_EXCEEDED) {
    return new DomainError('service_unavailable', DEADLINE_EXCEEDED_DETAIL, { retryAfterSeconds: 1 });
  }
  // Without a platform error code, RESOURCE_EXHAUSTED is the transport's: a message over
  // GRPC_MAX_MESSAGE_BYTES (it was a 500).
  if (err.code === grpc.status.RESOURCE_EXHAUSTED) {
    return new DomainError('payload_too_large', 'The request or its answer is larger than the platform passes between its services (GRPC_MAX_MESSAGE_BYTES).');
  }
  return new DomainError('internal', 'An unexpected error occurred.');
}

/** The DomainError a service threw, from its code, message and extension members (JSON); undefined for a code this platform does not know. */
function rebuiltError(code: string | undefined, message: string, extensionsJson: string | undefined): DomainError | undefined {
  if (!code || !(code in ERROR_CODES)) return undefined;
  return new DomainError(code as ErrorCode, message, extensionsJson ? JSON.parse(extensionsJson) : {});
}

/** Request and reply types of one method of a generated service definition. */
type MethodTypes<M> = {
  req: M extends { requestSerialize: (value: infer T) => Buffer } ? T : never;
  res: M extends { responseSerialize: (value: infer T) => Buffer } ? T : never;
  reqOut: M extends { requestDeserialize: (bytes: Buffer) => infer T } ? T : never;
  resOut: M extends { responseDeserialize: (bytes: Buffer) => infer T } ? T : never;
};

/**
 * What a handler must answer: the decoded shape of the reply (every field present, as the caller
 * will see it), not the loose encode shape whose fields are all optional, so a handler that
 * omits or misnames a reply field does not compile. int64 fields (decoded as strings) also take
 * numbers, as the encoder does.
 */
type Reply<Out, In> = Out extends Buffer
  ? Out
  : Out extends (infer O)[]
    ? In extends (infer I)[]
      ? Reply<O, I>[]
      : Out
    : Out extends object
      ? { [K in keyof Out]: K extends keyof In ? Reply<Out[K], NonNullable<In[K]>> : Out[K] }
      : Out extends string
        ? number extends In
          ? string | number
          : Out
        : Out;

/**
 * The async implementation of a service, typed from its generated definition: each method
 * receives the decoded request and resolves with the reply (or throws a DomainError).
 */
export type ServiceImpl<N extends ServiceName> = {
  [K in keyof ServiceDefinitions[N]]: (
    request: MethodTypes<ServiceDefinitions[N][K]>['reqOut'],
    /** The unary call; absent when the call came gathered (common.v1.Gathered). */
    call?: grpc.ServerUnaryCall<MethodTypes<ServiceDefinitions[N][K]>['reqOut'], MethodTypes<ServiceDefinitions[N][K]>['res']>,
  ) => Promise<Reply<MethodTypes<ServiceDefinitions[N][K]>['resOut'], MethodTypes<ServiceDefinitions[N][K]>['res']>>;
};

/** A promise-returning client of a service, typed from its generated definition. */
export type ServiceClient<N extends ServiceName> = {
  [K in keyof ServiceDefinitions[N]]: (
    request: MethodTypes<ServiceDefinitions[N][K]>['req'],
    options?: CallOptions,
  ) => Promise<MethodTypes<ServiceDefinitions[N][K]>['resOut']>;
} & { close(): void; raw: grpc.Client };

type UntypedImpl = Record<string, (request: any, call?: grpc.ServerUnaryCall<any, any>) => Promise<unknown>>;

/** `<service>/<Method>` of every generated service, e.g. `identity.v1.ApiKeys/CreateApiKey`. */
export type MethodName = { [N in ServiceName]: `${N}/${keyof ServiceDefinitions[N] & string}` }[ServiceName];

/**
 * Which services may call what, by the identity in their verified certificate: a rule for a
 * whole service (`identity.v1.ApiKeys`) or one method (`identity.v1.ApiKeys/CreateApiKey`, which
 * wins). Every registered method needs a rule; there is no default, so a new service or method
 * is refused to everyone until its callers are listed.
 */
export type CallerRules = Partial<Record<ServiceName | MethodName, readonly GrpcPeer[]>>;

const callerRules = new WeakMap<grpc.Server, CallerRules>();

/**
 * Adapts async handlers to grpc-js unary handlers: refuses a caller the rules do not list
 * (UNAUTHENTICATED without a verified certificate, PERMISSION_DENIED for another service), maps
 * DomainError to status + metadata, logs anything else with the trace id before answering
 * INTERNAL without internals, and records the call's duration and status. (Server spans,
 * continuing the caller's trace, come from OpenTelemetry's grpc-js instrumentation; without
 * recording, the handler runs in the caller's trace context restored here.)
 */
function unaryHandlers(serviceName: string, logger: Logger, impl: UntypedImpl, allowedCallers: (method: string) => ReadonlySet<string>): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [method, fn] of Object.entries(impl)) {
    const allowed = allowedCallers(method);
    out[method] = (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
      const started = performance.now();
      const done = (status: grpc.status) => recordRpcCall(serviceName, method, grpc.status[status] ?? String(status), (performance.now() - started) / 1000);
      const refusal = callerRefusal(callerOf(call), allowed, serviceName, method, logger);
      if (refusal) {
        const error = toGrpcError(refusal);
        done(error.code ?? grpc.status.PERMISSION_DENIED);
        return callback(error);
      }
      // The caller's trace context, when no instrumentation restores it (spans not recorded).
      // Kept for the failure below: a promise's callbacks run in the context they were attached
      // in, outside the handler's, so its log line would lack the trace id.
      const callContext = propagatesContextManually() ? incomingContext(call.metadata.getMap()) : context.active();
      const handled = context.with(callContext, () => fn(call.request, call));
      handled.then(
        (res) => {
          done(grpc.status.OK);
          callback(null, res as object);
        },
        (e: unknown) => {
          const error = toGrpcError(context.with(callContext, () => handlerError(e, serviceName, method, logger)));
          done(error.code ?? grpc.status.UNKNOWN);
          callback(error);
        },
      );
    };
  }
  return out;
}

/** Why `caller` may not call the method: unauthenticated without a verified certificate, forbidden unless listed; undefined when it may. */
function callerRefusal(caller: string | undefined, allowed: ReadonlySet<string>, serviceName: string, method: string, logger: Logger): DomainError | undefined {
  if (caller && allowed.has(caller)) return undefined;
  logger.warn({ rpc: `${serviceName}/${method}`, caller: caller ?? null }, 'refused gRPC call from a caller without the right to it');
  return caller ? new DomainError('forbidden', `${caller} may not call ${serviceName}/${method}.`) : new DomainError('unauthenticated', 'A client certificate of this installation is required.');
}

/**
 * The DomainError a handler's failure answers. Text the database refused is the caller's 400 (a
 * backstop behind the gateway's input policy), and a database that cannot serve now its 503 to
 * retry, not a 500; anything else is logged with the trace id and answered `internal` without
 * internals.
 */
function handlerError(e: unknown, serviceName: string, method: string, logger: Logger): DomainError {
  if (e instanceof DomainError) return e;
  const unavailable = databaseUnavailableError(e);
  const known = invalidTextError(e) ?? unavailable;
  if (!known) logger.error({ err: e, rpc: `${serviceName}/${method}`, traceId: currentTraceId() }, 'unhandled error in gRPC handler');
  // Its code only: the driver's message can quote the statement and its bound values.
  if (unavailable) logger.warn({ code: (e as { code?: unknown }).code ?? (e as Error).name, rpc: `${serviceName}/${method}`, traceId: currentTraceId() }, 'database unavailable: answered service_unavailable');
  return known ?? new DomainError('internal');
}

/** A registered method as a gathered call reaches it (see common.v1.Gathered). */
interface GatheredMethod {
  serviceName: string;
  method: string;
  fn: UntypedImpl[string];
  decode: (bytes: Buffer) => unknown;
  encode: (reply: any) => Buffer;
  allowed: ReadonlySet<string>;
  logger: Logger;
}

const gatheredMethods = new WeakMap<grpc.Server, Map<string, GatheredMethod>>();

type Refusal = { code: string; message: string; extensionsJson: string };
const refusalOf = (e: DomainError): Refusal => ({ code: e.code, message: e.message, extensionsJson: JSON.stringify(e.extensions) });

/**
 * Serves common.v1.Gathered/Call: each call of the batch exactly as its unary method would be
 * served (the caller's rights to that method, its trace context, its error mapping, its metrics),
 * all at once, each outcome written as soon as it is decided.
 */
function serveGathered(methods: Map<string, GatheredMethod>, call: grpc.ServerWritableStream<any, any>): void {
  const calls = (call.request?.calls ?? []) as { method: string; request: Buffer; trace: Record<string, string> }[];
  let open = calls.length;
  if (open === 0) return void call.end();
  const caller = callerOf(call as unknown as grpc.ServerUnaryCall<unknown, unknown>);
  const answer = (index: number, outcome: { reply: Buffer } | { refused: Refusal }) => {
    if (!call.cancelled) call.write({ index, ...outcome });
    if (--open === 0) call.end();
  };
  calls.forEach((c, index) => {
    const m = methods.get(c.method);
    if (!m) return answer(index, { refused: refusalOf(new DomainError('bad_request', `No method ${c.method} here.`)) });
    const started = performance.now();
    const done = (status: grpc.status) => recordRpcCall(m.serviceName, m.method, grpc.status[status] ?? String(status), (performance.now() - started) / 1000);
    const refusal = callerRefusal(caller, m.allowed, m.serviceName, m.method, m.logger);
    if (refusal) {
      done(GRPC_STATUS[refusal.code]);
      return answer(index, { refused: refusalOf(refusal) });
    }
    let handled: Promise<unknown>;
    // The call's trace context, kept for logging its failure (see unaryHandlers).
    const callContext = incomingContext(c.trace ?? {});
    try {
      const request = m.decode(c.request);
      handled = context.with(callContext, () => m.fn(request));
    } catch (e) {
      handled = Promise.reject(e instanceof DomainError ? e : new DomainError('bad_request', `The request is not a ${c.method} request.`));
    }
    handled.then(
      (reply) => {
        let bytes: Buffer;
        try {
          bytes = m.encode(reply);
        } catch (e) {
          const error = context.with(callContext, () => handlerError(e, m.serviceName, m.method, m.logger));
          done(grpc.status.INTERNAL);
          return answer(index, { refused: refusalOf(error) });
        }
        done(grpc.status.OK);
        answer(index, { reply: bytes });
      },
      (e: unknown) => {
        const error = context.with(callContext, () => handlerError(e, m.serviceName, m.method, m.logger));
        done(GRPC_STATUS[error.code]);
        answer(index, { refused: refusalOf(error) });
      },
    );
  });
}

/**
 * Registers the implementation of the service `name` (e.g. `billing.v1.Members`) on `server`.
 * The implementation is checked against the types generated from its proto; each method is
 * served only to the callers the server's rules list for it (throws when a method has none).
 */
export function addGrpcService<N extends ServiceName>(server: grpc.Server, name: N, logger: Logger, impl: ServiceImpl<N>): void {
  const definition = serviceDefinition(SERVICE_FILES[name], name);
  const rules = callerRules.get(server);
  if (!rules) throw new Error('addGrpcService: create the server with createGrpcServer(callerRules)');
  const allowedCallers = (method: string) => {
    const listed = rules[`${name}/${method}` as MethodName] ?? rules[name];
    if (!listed) throw new Error(`no caller rule for ${name}/${method}: list the services that may call it in this service's caller rules`);
    return new Set<string>(listed);
  };
  server.addService(definition.service, unaryHandlers(name, logger, impl as unknown as UntypedImpl, allowedCallers));
  const gathered = gatheredMethods.get(server)!;
  for (const [method, fn] of Object.entries(impl as unknown as UntypedImpl)) {
    const def = definition.service[method]!;
    gathered.set(`${name}/${method}`, { serviceName: name, method, fn, decode: def.requestDeserialize, encode: def.responseSerialize, allowed: allowedCallers(method), logger });
  }
}

/**
 * A gRPC server with the standard health service (open to every peer the transport admits);
 * every registered service reports SERVING. `callers` says which service may call which method.
 */
export function createGrpcServer(callers: CallerRules): { server: grpc.Server; setServing: (serving: boolean) => void } {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': maxMessageBytesOption(), ...NO_CHANNELZ });
  callerRules.set(server, callers);
  const gathered = new Map<string, GatheredMethod>();
  gatheredMethods.set(server, gathered);
  // Open to every peer the transport admits: each gathered call is checked against its own method's rule.
  server.addService(serviceDefinition(SERVICE_FILES['common.v1.Gathered'], 'common.v1.Gathered').service, {
    Call: (call: grpc.ServerWritableStream<any, any>) => serveGathered(gathered, call),
  });
  let serving = true;
  const Health = serviceDefinition('grpc/health/v1/health.proto', 'grpc.health.v1.Health');
  server.addService(Health.service, {
    Check: (_call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) => cb(null, { status: serving ? 'SERVING' : 'NOT_SERVING' }),
    Watch: (call: grpc.ServerWritableStream<any, any>) => {
      call.write({ status: serving ? 'SERVING' : 'NOT_SERVING' });
    },
  });
  return { server, setServing: (s) => (serving = s) };
}

/** Binds `address` with the process's transport (see `configureGrpcTransport`). */
export function listen(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolvePort, reject) => {
    let credentials: grpc.ServerCredentials;
    try {
      credentials = serverCredentialsFor(address);
    } catch (e) {
      return reject(e);
    }
    server.bindAsync(address, credentials, (err, port) => (err ? reject(err) : resolvePort(port)));
  });
}

export function shutdownServer(server: grpc.Server, graceMs = 5000): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      done();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      done();
    });
  });
}

export interface CallOptions {
  deadlineMs?: number;
  metadata?: Record<string, string>;
}

/**
 * A promise-returning client for the service `name` (e.g. `billing.v1.Members`), typed from
 * its proto. Every call carries a deadline and the current trace context; errors come back
 * as DomainError. It uses the process's transport (see `configureGrpcTransport`). With
 * `gather`, the calls made to the same server in one event-loop turn, by this client and every
 * other gathering client of that server, go out as one common.v1.Gathered call (see `Gatherer`).
 */
export function createClient<N extends ServiceName>(
  name: N,
  address: string,
  defaultDeadlineMs = 5000,
  options: { serverName?: string; gather?: boolean } = {},
): ServiceClient<N> {
  const Ctor = serviceDefinition(SERVICE_FILES[name], name);
  const serverName = options.serverName ?? name.split('.')[0]!;
  const client = new Ctor(address, clientCredentialsFor(address), channelOptions(serverName)) as grpc.Client & Record<string, Function>;
  const gatherer = options.gather ? gathererFor(address, serverName) : undefined;
  const api: Record<string, unknown> = {
    close: () => {
      client.close();
      gatherer?.release();
    },
    raw: client,
  };
  for (const method of Object.keys(Ctor.service)) {
    const def = Ctor.service[method]!;
    const alone = (req: unknown, opts: CallOptions = {}) =>
      new Promise((res, rej) => {
        // The trace context: added here when spans are not recorded, else by OpenTelemetry's
        // grpc-js instrumentation (with the client span as parent).
        const md = new grpc.Metadata();
        if (propagatesContextManually()) for (const [k, v] of Object.entries(injectTraceHeaders())) md.set(k, v);
        for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
        const deadline = new Date(Date.now() + (opts.deadlineMs ?? defaultDeadlineMs));
        withoutStackCapture(() => client[method]!(req, md, { deadline }, (err: grpc.ServiceError | null, reply: unknown) => (err ? rej(fromGrpcError(err)) : res(reply))));
      });
    // Gathered only while spans are not recorded (a recorded call keeps its own client and
    // server spans) and without metadata of its own.
    api[method] = gatherer
      ? (req: unknown, opts: CallOptions = {}) =>
          opts.metadata || !propagatesContextManually()
            ? alone(req, opts)
            : gatherer.call({ method: `${name}/${method}`, encode: () => def.requestSerialize(req), decode: def.responseDeserialize, deadlineMs: opts.deadlineMs ?? defaultDeadlineMs, alone: () => alone(req, opts) })
      : alone;
  }
  return api as ServiceClient<N>;
}

/**
 * Runs `start` (which starts a grpc-js call) without stack capture: grpc-js captures the caller's
 * stack (new Error()) on every call for the error it would raise, and fromGrpcError builds its own.
 */
function withoutStackCapture<T>(start: () => T): T {
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return start();
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
}

function channelOptions(serverName: string): grpc.ChannelOptions {
  return {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.enable_retries': 0,
    ...reconnectOptions(),
    ...NO_CHANNELZ,
    // The certificate to expect: the service named by the package (`billing.v1.…` → billing),
    // or, for services every server offers (grpc.health), the one the caller names.
    ...serverNameOptions(serverName),
  };
}

interface GatheredItem {
  method: string;
  encode: () => Buffer;
  decode: (bytes: Buffer) => unknown;
  deadlineMs: number;
  /** The same call made on its own (when it is the only one gathered). */
  alone: () => Promise<unknown>;
}

/** One streamed common.v1.GatheredOutcome as decoded. */
type Outcome = { index: number; reply?: Buffer | null; refused?: Refusal | null };

interface Waiting extends GatheredItem {
  trace: Record<string, string>;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/** Calls per gathered call at most (a turn with more sends several). */
const GATHER_MAX = 256;

/**
 * Gathers the calls made to one server in one event-loop turn into one common.v1.Gathered call
 * (see gathered.proto); a call made alone in its turn goes out as its own unary call. Each
 * caller is answered by its own outcome as soon as the server streams it. A gathered call that
 * fails as a whole fails each call still unanswered with the same error a unary call would
 * have (a write it carried may have run: none is retried).
 */
class Gatherer {
  private queue: Waiting[] = [];
  private scheduled = false;
  private users = 0;

  constructor(
    private readonly client: grpc.Client & Record<string, Function>,
    private readonly onIdle: () => void,
  ) {}

  call(item: GatheredItem): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...item, trace: injectTraceHeaders(), resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // setImmediate: calls made by requests whose bytes arrived in the same turn join in.
      setImmediate(() => {
        this.scheduled = false;
        const queued = this.queue;
        this.queue = [];
        if (queued.length === 1) return void queued[0]!.alone().then(queued[0]!.resolve, queued[0]!.reject);
        for (let i = 0; i < queued.length; i += GATHER_MAX) this.send(queued.slice(i, i + GATHER_MAX));
      });
    });
  }

  /**
   * Sends the batch as gathered calls of at most half the largest message a server takes
   * (GRPC_MAX_MESSAGE_BYTES): one large request must not make the calls it was gathered with too
   * large to pass (each of those would fail 413); a request over that budget goes alone.
   */
  private send(batch: Waiting[]): void {
    let calls: { method: string; request: Buffer; trace: Record<string, string> }[];
    try {
      calls = batch.map((w) => ({ method: w.method, request: w.encode(), trace: w.trace }));
    } catch (e) {
      return batch.forEach((w) => w.reject(e));
    }
    const budget = maxMessageBytesOption() / 2;
    const flush = (from: number, to: number) => {
      if (to - from === 1) batch[from]!.alone().then(batch[from]!.resolve, batch[from]!.reject);
      else if (to > from) this.sendGathered(batch.slice(from, to), calls.slice(from, to));
    };
    let from = 0;
    let bytes = 0;
    for (let i = 0; i < batch.length; i++) {
      // The call's request, its method name and trace context, and their framing.
      const size = calls[i]!.request.length + calls[i]!.method.length + 256;
      if (bytes > 0 && bytes + size > budget) {
        flush(from, i);
        from = i;
        bytes = 0;
      }
      bytes += size;
    }
    flush(from, batch.length);
  }

  private sendGathered(batch: Waiting[], calls: { method: string; request: Buffer; trace: Record<string, string> }[]): void {
    const open = new Set(batch.map((_, i) => i));
    const deadline = new Date(Date.now() + Math.max(...batch.map((w) => w.deadlineMs)));
    const stream: grpc.ClientReadableStream<Outcome> = withoutStackCapture(() => this.client.Call!({ calls }, new grpc.Metadata(), { deadline }));
    stream.on('data', (o: Outcome) => {
      const w = batch[o.index];
      if (!w || !open.delete(o.index)) return;
      if (o.reply) {
        try {
          w.resolve(w.decode(o.reply));
        } catch (e) {
          w.reject(e);
        }
      } else w.reject((o.refused && rebuiltError(o.refused.code, o.refused.message, o.refused.extensionsJson)) ?? new DomainError('internal', 'An unexpected error occurred.'));
    });
    // The error is built only when a call is left to fail: an Error captures a stack trace, and
    // every gathered call ends, nearly always with all of its calls answered.
    const failRest = (error: () => DomainError) => {
      if (open.size === 0) return;
      const e = error();
      for (const i of open) batch[i]!.reject(e);
      open.clear();
    };
    stream.on('error', (err: grpc.ServiceError) => failRest(() => fromGrpcError(err)));
    stream.on('end', () => failRest(() => new DomainError('internal', 'The server ended a gathered call without answering every call in it.')));
  }

  /** One more client uses this gatherer; `release` when it closes. */
  acquire(): this {
    this.users++;
    return this;
  }

  release(): void {
    if (--this.users === 0) this.onIdle();
  }
}

/**
 * One gatherer per server (address and expected certificate) and credentials of ours, shared by
 * every client of that server that gathers.
 */
const gatherers = new WeakMap<grpc.ChannelCredentials, Map<string, Gatherer>>();

function gathererFor(address: string, serverName: string): Gatherer {
  const credentials = clientCredentialsFor(address);
  let ours = gatherers.get(credentials);
  if (!ours) gatherers.set(credentials, (ours = new Map()));
  const key = `${serverName}@${address}`;
  let g = ours.get(key);
  if (!g) {
    const Ctor = serviceDefinition(SERVICE_FILES['common.v1.Gathered'], 'common.v1.Gathered');
    const client = new Ctor(address, credentials, channelOptions(serverName)) as grpc.Client & Record<string, Function>;
    const byKey = ours;
    g = new Gatherer(client, () => {
      client.close();
      byKey.delete(key);
    });
    ours.set(key, g);
  }
  return g.acquire();
}

/**
 * The client with its `reads` (methods that change nothing) shared between identical concurrent
 * requests (the same request JSON) through `SharedLookups`: every caller is answered by a call
 * started after it arrived, and a burst of identical reads costs two calls, not one each. A call
 * with options of its own (deadline, metadata) is not shared. The shared call carries the trace
 * context of the caller that started it.
 */
export function withSharedReads<N extends ServiceName>(client: ServiceClient<N>, reads: (keyof ServiceDefinitions[N] & string)[]): ServiceClient<N> {
  const shared: Record<string, unknown> = { ...client };
  for (const method of reads) {
    const call = client[method] as unknown as (req: unknown, opts?: CallOptions) => Promise<unknown>;
    const lookups = new SharedLookups<unknown>();
    shared[method] = (req: unknown, opts?: CallOptions) => (opts ? call(req, opts) : lookups.get(JSON.stringify(req), () => call(req)));
  }
  return shared as ServiceClient<N>;
}
