import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals } from '@billing/service-runtime';
import { buildGateway } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('gateway');
const config = loadConfig();
const gateway = await buildGateway(config);
await gateway.app.listen({ host: config.HOST, port: config.PORT });
gateway.logger.info({ port: config.PORT }, 'gateway listening');
closeOnSignals(gateway.logger, async () => {
  await gateway.close();
  await stopTelemetry();
});
