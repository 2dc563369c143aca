import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals, migrate } from '@billing/service-runtime';
import { buildGateway, openGatewayDatabase } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('gateway');
const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openGatewayDatabase(config);
  console.log(`gateway: applied ${(await migrate(orm, config.DB_SCHEMA)).length} migration(s)`);
  await orm.close();
} else {
  const gateway = await buildGateway(config);
  await gateway.app.listen({ host: config.HOST, port: config.PORT });
  gateway.logger.info({ port: config.PORT }, 'gateway listening');
  closeOnSignals(gateway.logger, async () => {
    await gateway.close();
    await stopTelemetry();
  });
}
