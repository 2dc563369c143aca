import { pino, stdSerializers, type Logger } from 'pino';

export type { Logger };

/** A Postgres error (pg's DatabaseError, or MikroORM's exception copying its fields). */
function isDatabaseError(e: unknown): e is Error & Record<string, unknown> {
  const code = e instanceof Error ? (e as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && ('severity' in (e as object) || 'routine' in (e as object));
}

/**
 * A database error without its message, detail or query: the driver and the ORM put the
 * statement with its bound values (and Postgres the offending value) there, which can be
 * personal data or secrets. The SQLSTATE, constraint and table say what went wrong.
 */
function serializeDatabaseError(e: Error & Record<string, unknown>) {
  const frames = e.stack?.split('\n').filter((l) => l.trim().startsWith('at ')).join('\n');
  return {
    type: e.name,
    message: `database error ${String(e.code)} (message withheld: it can hold bound values)`,
    code: e.code,
    table: e.table,
    column: e.column,
    constraint: e.constraint,
    routine: e.routine,
    stack: frames,
  };
}

/** Errors as pino serialises them, except that database errors anywhere in the cause chain lose their text. */
export function serializeError(e: unknown): unknown {
  if (isDatabaseError(e)) return serializeDatabaseError(e);
  if (e instanceof Error && e.cause !== undefined) {
    let cause: unknown = e.cause;
    for (let depth = 0; cause instanceof Error && depth < 10; depth++) {
      if (isDatabaseError(cause)) {
        // pino's serialiser would append the cause's message to this one's.
        return { type: e.name, message: e.message, stack: e.stack, cause: serializeError(e.cause) };
      }
      cause = cause.cause;
    }
  }
  return stdSerializers.err(e as Error);
}

/**
 * JSON logs on stdout. Fields that could hold secrets are redacted at the source, and database
 * errors are logged without their text (see `serializeError`).
 */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name: service,
    level,
    serializers: { err: serializeError, error: serializeError },
    redact: {
      paths: ['password', 'newPassword', 'token', 'key', 'signingSecret', 'gatewayPassword', 'gatewayUsername', 'merchantGuid', '*.password', '*.token', 'headers.authorization', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  });
}
