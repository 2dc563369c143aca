import { configureGrpcTransport, createGrpcServer, createLogger, listen, shutdownServer, type Logger } from '@billing/service-runtime';
import type { CheckoutConfig } from './config.js';
import { CHECKOUT_CALLERS } from './grpc-callers.js';

export interface CheckoutApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the checkout service (health only so far). */
export async function startCheckout(config: CheckoutConfig): Promise<CheckoutApp> {
  const logger = createLogger('checkout', config.LOG_LEVEL);
  configureGrpcTransport(config);
  const { server } = createGrpcServer(CHECKOUT_CALLERS);
  const port = await listen(server, config.CHECKOUT_GRPC_ADDRESS);
  logger.info({ port }, 'checkout listening');
  return { port, logger, close: () => shutdownServer(server) };
}
