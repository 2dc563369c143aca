import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals } from '@billing/service-runtime';
import { startWebhooks } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('webhooks');
const config = loadConfig();
if (process.argv[2] !== 'migrate') {
  const app = await startWebhooks(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  });
}
