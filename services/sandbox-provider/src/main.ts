import type { AddressInfo } from 'node:net';
import { startTelemetry, stopTelemetry } from '@billing/telemetry';

// First, and awaited: OpenTelemetry patches fastify as it loads, so everything else is imported after it.
await startTelemetry('sandbox-provider');
const { closeOnSignals, startOps } = await import('@billing/service-runtime/process');
const { buildSandbox } = await import('./app.js');
const { loadConfig } = await import('./config.js');

const config = loadConfig();
// No database: nothing to migrate.
if (process.argv[2] !== 'migrate') {
  const { app, logger } = buildSandbox(config);
  await app.listen({ host: config.SANDBOX_PROVIDER_HOST, port: config.SANDBOX_PROVIDER_PORT });
  // The bound port: SANDBOX_PROVIDER_PORT=0 picks a free one.
  logger.info({ host: config.SANDBOX_PROVIDER_HOST, port: (app.server.address() as AddressInfo).port }, 'sandbox payment provider listening');
  const ops = await startOps({ host: config.METRICS_HOST, port: config.METRICS_PORT, logger, dependencies: [] });
  closeOnSignals(logger, async () => {
    await app.close();
    await ops.close();
    await stopTelemetry();
  });
}
