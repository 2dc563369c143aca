import { startTelemetry, stopTelemetry } from '@billing/telemetry';
import { closeOnSignals } from '@billing/service-runtime';
import { startCheckout } from './app.js';
import { loadConfig } from './config.js';

startTelemetry('checkout');
const config = loadConfig();
if (process.argv[2] !== 'migrate') {
  const app = await startCheckout(config);
  closeOnSignals(app.logger, async () => {
    await app.close();
    await stopTelemetry();
  });
}
