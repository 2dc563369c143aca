import { createGrpcServer, createLogger, listen, shutdownServer, type Logger } from '@billing/service-runtime';
import type { CheckoutConfig } from './config.js';

export interface CheckoutApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the checkout service (health only so far). */
export async function startCheckout(config: CheckoutConfig): Promise<CheckoutApp> {
  const logger = createLogger('checkout', config.LOG_LEVEL);
  const { server } = createGrpcServer();
  const port = await listen(server, config.CHECKOUT_GRPC_ADDRESS);
  logger.info({ port }, 'checkout listening');
  return { port, logger, close: () => shutdownServer(server) };
}
