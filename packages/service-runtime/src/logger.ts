import { pino, type Logger } from 'pino';

export type { Logger };

/** JSON logs on stdout. Fields that could hold secrets are redacted at the source. */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name: service,
    level,
    redact: {
      paths: ['password', 'newPassword', 'token', 'key', 'signingSecret', 'gatewayPassword', 'gatewayUsername', 'merchantGuid', '*.password', '*.token', 'headers.authorization', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  });
}
