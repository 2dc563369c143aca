import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals, migrate } from '@billing/service-runtime';
import { openCheckoutDatabase, startCheckout } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('checkout');
const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openCheckoutDatabase(config);
  console.log(`checkout: applied ${(await migrate(orm, config.DB_SCHEMA)).length} migration(s)`);
  await orm.close();
} else {
  const app = await startCheckout(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  });
}
