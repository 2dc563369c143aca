import { createGrpcServer, createLogger, listen, shutdownServer, type Logger } from '@billing/service-runtime';
import type { WebhooksConfig } from './config.js';

export interface WebhooksApp {
  port: number;
  logger: Logger;
  close(): Promise<void>;
}

/** Composition root of the webhooks service (health only so far). */
export async function startWebhooks(config: WebhooksConfig): Promise<WebhooksApp> {
  const logger = createLogger('webhooks', config.LOG_LEVEL);
  const { server } = createGrpcServer();
  const port = await listen(server, config.WEBHOOKS_GRPC_ADDRESS);
  logger.info({ port }, 'webhooks listening');
  return { port, logger, close: () => shutdownServer(server) };
}
