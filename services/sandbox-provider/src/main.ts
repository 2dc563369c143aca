import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { startTelemetry, stopTelemetry } from '@billing/telemetry';

// First, and awaited: OpenTelemetry patches fastify as it loads, so everything else is imported after it.
await startTelemetry('sandbox-provider');
const { closeOnSignals, createLogger, startOps } = await import('@billing/service-runtime/process');
const { buildSandbox } = await import('./app.js');
const { loadConfig } = await import('./config.js');
const { Ledger } = await import('./ledger.js');

const config = loadConfig();
// No database: nothing to migrate.
if (process.argv[2] !== 'migrate') {
  const logger = createLogger('sandbox-provider', config.LOG_LEVEL);
  let ledger: InstanceType<typeof Ledger> | undefined;
  if (config.SANDBOX_LEDGER === 'file') {
    const file = resolve(config.DATA_DIR, 'sandbox', 'ledger.jsonl');
    // A failed write loses what waited on it: stop rather than answer as if it were kept (the
    // callers get no answer and repeat their requests against the restarted sandbox).
    const opened = await Ledger.open(file, (e) => {
      logger.fatal({ err: e }, 'sandbox ledger write failed; stopping');
      process.exit(70);
    });
    ledger = opened.ledger;
    logger.info({ file, entries: opened.entries, skipped: opened.skipped }, 'sandbox ledger read back');
  }
  const { app } = buildSandbox(config, ledger, logger);
  await app.listen({ host: config.SANDBOX_PROVIDER_HOST, port: config.SANDBOX_PROVIDER_PORT });
  // The bound port: SANDBOX_PROVIDER_PORT=0 picks a free one.
  logger.info({ host: config.SANDBOX_PROVIDER_HOST, port: (app.server.address() as AddressInfo).port }, 'sandbox payment provider listening');
  const ops = await startOps({ host: config.METRICS_HOST, port: config.METRICS_PORT, logger, dependencies: [] });
  closeOnSignals(logger, async () => {
    await app.close();
    await ledger?.close();
    await ops.close();
    await stopTelemetry();
  });
}
