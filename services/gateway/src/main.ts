import { startTelemetry, stopTelemetry } from '@billing/telemetry';

// First, and awaited: OpenTelemetry patches grpc-js, pg and fastify as they load, so
// everything else is imported after it.
await startTelemetry('gateway');
const { closeOnSignals, migrate } = await import('@billing/service-runtime');
const { buildGateway, openGatewayDatabase } = await import('./app.js');
const { loadConfig } = await import('./config.js');
const { MIGRATIONS } = await import('./migrations/index.js');

const config = loadConfig();
if (process.argv[2] === 'migrate') {
  const orm = await openGatewayDatabase(config);
  console.log(`gateway: applied ${(await migrate(orm, config.DB_SCHEMA, MIGRATIONS)).length} migration(s)`);
  await orm.close();
} else {
  const gateway = await buildGateway(config);
  await gateway.app.listen({ host: config.HOST, port: config.PORT });
  // The port bound, not the one asked for: PORT=0 lets the system pick one.
  const address = gateway.app.server.address();
  gateway.logger.info({ port: typeof address === 'object' && address ? address.port : config.PORT }, 'gateway listening');
  closeOnSignals(gateway.logger, async () => {
    await gateway.close();
    await stopTelemetry();
  });
}
