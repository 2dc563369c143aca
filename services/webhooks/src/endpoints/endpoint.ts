import { EntitySchema } from '@mikro-orm/postgresql';
import { isWebhookEventType, type ApiKeyEndpointState } from '@billing/contracts';

/**
 * The webhooks service's own copy of one API key's webhook endpoint, built from identity's
 * `api_key.*` events (never from identity's tables). `version` is the key's change counter:
 * an older state arriving late never overwrites a newer one.
 */
export class Endpoint {
  apiKeyId!: string;
  merchantId!: string;
  url: string | null = null;
  /** null: every event type; []: none. */
  eventTypes: string[] | null = null;
  enabled = false;
  revoked = false;
  version = 0;
  updatedAt: Date = new Date();

  static fromState(s: ApiKeyEndpointState, at = new Date()): Endpoint {
    return Object.assign(new Endpoint(), {
      apiKeyId: s.apiKeyId,
      merchantId: s.merchantId,
      url: s.webhookUrl,
      eventTypes: s.webhookEvents,
      enabled: s.webhookEnabled,
      revoked: s.revoked,
      version: s.version,
      updatedAt: at,
    });
  }

  /** Enabled, not revoked and with a URL: events it subscribes to are delivered here. */
  isLive(): boolean {
    return this.enabled && !this.revoked && !!this.url;
  }

  /** Whether an event of this type is delivered here: live, subscribed, and a webhook type. */
  accepts(eventType: string): boolean {
    if (!this.isLive() || !isWebhookEventType(eventType)) return false;
    return this.eventTypes === null || this.eventTypes.includes(eventType);
  }
}

export const EndpointSchema = new EntitySchema<Endpoint>({
  class: Endpoint,
  tableName: 'endpoints',
  properties: {
    apiKeyId: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    url: { type: 'text', nullable: true },
    eventTypes: { type: 'json', nullable: true },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    version: { type: 'integer' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

/** Keeps, per key, only the newest of several states (a batch may hold more than one). */
export function newestStates(states: ApiKeyEndpointState[]): ApiKeyEndpointState[] {
  const byKey = new Map<string, ApiKeyEndpointState>();
  for (const s of states) {
    const seen = byKey.get(s.apiKeyId);
    if (!seen || s.version > seen.version) byKey.set(s.apiKeyId, s);
  }
  return [...byKey.values()];
}
