import type { Scope } from '@billing/proto-types/common/v1/Scope';
import type { Logger } from '@billing/service-runtime';
import type { WebhooksClients } from '../backends/clients.js';

/**
 * Called after identity has committed a change of a key's webhook endpoint (revocation, webhook
 * settings) and before the gateway answers it: the webhooks service brings its copy of the
 * endpoint up to date at once (`webhooks.v1.WebhookEndpoints/SyncEndpoint`), so nothing it
 * delivers or replays after the answer uses the old state. Its copy otherwise follows the
 * change's `api_key.*` event, which reaches the bus through identity's outbox a little later,
 * possibly after events raised once the client has its answer.
 *
 * Never fails the request: the change has happened, and the event still brings the copy up to
 * date when the webhooks service is back, so a failed sync is logged and the answer stands.
 */
export async function syncWebhookEndpoint(webhooks: WebhooksClients, logger: Logger, scope: Scope, apiKeyId: string): Promise<void> {
  try {
    await webhooks.endpoints.SyncEndpoint({ scope, apiKeyId });
  } catch (err) {
    logger.warn({ err, apiKeyId }, 'webhooks could not sync the API key endpoint now; its api_key event will bring the copy up to date');
  }
}
