import { closeOnSignals } from '@billing/service-runtime';
import { buildSandbox } from './app.js';
import { loadConfig } from './config.js';

const config = loadConfig();
// No database: nothing to migrate.
if (process.argv[2] !== 'migrate') {
  const { app, logger } = buildSandbox(config);
  await app.listen({ host: config.SANDBOX_PROVIDER_HOST, port: config.SANDBOX_PROVIDER_PORT });
  logger.info({ port: config.SANDBOX_PROVIDER_PORT }, 'sandbox payment provider listening');
  closeOnSignals(logger, () => app.close());
}
