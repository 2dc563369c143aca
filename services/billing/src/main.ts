import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals, migrate } from '@billing/service-runtime';
import { openBillingDatabase, startBilling } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('billing');
const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openBillingDatabase(config);
  console.log(`billing: applied ${(await migrate(orm, config.DB_SCHEMA)).length} migration(s)`);
  await orm.close();
} else {
  const app = await startBilling(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  });
}
