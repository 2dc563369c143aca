import { pino, stdSerializers, type Logger } from 'pino';
import { currentTraceId } from '@billing/telemetry';

export type { Logger };

/**
 * JSON logs on stdout. Every line written inside a trace carries its `traceId` (the id a caller
 * sees in problem details). Fields that could hold secrets are redacted at the source, and
 * database errors are logged without their SQL, bound values or row details (see `errorForLog`).
 */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name: service,
    level,
    mixin: () => {
      const traceId = currentTraceId();
      return traceId ? { traceId } : {};
    },
    serializers: { err: errorForLog, error: errorForLog },
    redact: {
      paths: ['password', 'newPassword', 'token', 'key', 'signingSecret', 'gatewayPassword', 'gatewayUsername', 'merchantGuid', '*.password', '*.token', 'headers.authorization', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  });
}

/** A Postgres error (node-postgres, or MikroORM's exception wrapping one). */
interface DatabaseErrorLike {
  code?: string;
  sqlState?: string;
  severity?: string;
  routine?: string;
  constraint?: string;
  table?: string;
  column?: string;
  name?: string;
}

function isDatabaseError(e: unknown): e is DatabaseErrorLike & Error {
  if (!(e instanceof Error)) return false;
  const d = e as DatabaseErrorLike;
  return typeof d.sqlState === 'string' || (typeof d.severity === 'string' && typeof d.routine === 'string');
}

/**
 * pino's error serializer, except for database errors: their message (the statement with its
 * bound values inlined) and details (`Key (email)=(…)`) can hold personal data, so only the
 * SQLSTATE and the names of the constraint, table and column are kept.
 */
export function errorForLog(e: unknown): unknown {
  if (!isDatabaseError(e)) {
    if (!(e instanceof Error)) return e;
    // pino's serializer appends every cause's message to this one's: not a database error's.
    for (let cause = e.cause, depth = 0; cause instanceof Error && depth < 10; cause = cause.cause, depth++) {
      if (isDatabaseError(cause)) return { type: e.name, message: e.message, stack: e.stack, cause: errorForLog(e.cause) };
    }
    return stdSerializers.err(e);
  }
  const code = e.sqlState ?? e.code;
  const message = `database error ${code ?? 'unknown'}${e.constraint ? ` (constraint ${e.constraint})` : ''}`;
  const frames = (e.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
  return {
    type: e.constructor?.name ?? e.name,
    message,
    code,
    ...(e.constraint ? { constraint: e.constraint } : {}),
    ...(e.table ? { table: e.table } : {}),
    ...(e.column ? { column: e.column } : {}),
    ...(e.routine ? { routine: e.routine } : {}),
    stack: [`${e.name}: ${message}`, ...frames].join('\n'),
  };
}
