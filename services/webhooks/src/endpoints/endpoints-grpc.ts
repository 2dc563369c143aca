import type { MikroORM } from '@mikro-orm/postgresql';
import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import { syncEndpoint, type EndpointStateSource } from './sync-endpoint.js';

/** `webhooks.v1.WebhookEndpoints`: the gateway reports a committed change of a key's endpoint. */
export function endpointsGrpc(orm: MikroORM, source: EndpointStateSource, scheduler: { nudge(): void }): ServiceImpl<'webhooks.v1.WebhookEndpoints'> {
  return {
    SyncEndpoint: async (req) => {
      const res = await syncEndpoint(orm, source, requireScope(req.scope), req.apiKeyId);
      if (res.caughtUp) scheduler.nudge();
      return { version: res.version, applied: res.applied };
    },
  };
}
