import type { Logger } from './logger.js';

/**
 * Closes everything in reverse order of start on SIGINT/SIGTERM, then exits. A second signal,
 * or a close that takes longer than `graceMs`, exits at once.
 */
export function closeOnSignals(logger: Logger, close: () => Promise<void>, graceMs = 10_000): void {
  let closing = false;
  const handler = (signal: NodeJS.Signals) => {
    if (closing) process.exit(1);
    closing = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error('shutdown timed out');
      process.exit(1);
    }, graceMs);
    timer.unref();
    close().then(
      () => process.exit(0),
      (e) => {
        logger.error({ err: e }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
