import { startTelemetry, stopTelemetry } from '@billing/telemetry';

// First, and awaited: OpenTelemetry patches grpc-js, pg and fastify as they load, so
// everything else is imported after it.
await startTelemetry('billing');
const { closeOnSignals, migrate } = await import('@billing/service-runtime');
const { openBillingDatabase, startBilling } = await import('./app.js');
const { loadConfig } = await import('./config.js');
const { MIGRATIONS } = await import('./migrations/index.js');

const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openBillingDatabase(config);
  console.log(`billing: applied ${(await migrate(orm, config.DB_SCHEMA, MIGRATIONS)).length} migration(s)`);
  await orm.close();
} else {
  const app = await startBilling(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  });
}
