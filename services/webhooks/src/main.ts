import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals, migrate } from '@billing/service-runtime';
import { openWebhooksDatabase, startWebhooks } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('webhooks');
const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openWebhooksDatabase(config);
  console.log(`webhooks: applied ${(await migrate(orm, config.DB_SCHEMA)).length} migration(s)`);
  await orm.close();
} else {
  const app = await startWebhooks(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  }, 30_000);
}
