import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals, migrate } from '@billing/service-runtime';
import { openIdentityDatabase, startIdentity } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('identity');
const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openIdentityDatabase(config);
  console.log(`identity: applied ${(await migrate(orm, config.DB_SCHEMA)).length} migration(s)`);
  await orm.close();
} else {
  const app = await startIdentity(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  });
}
