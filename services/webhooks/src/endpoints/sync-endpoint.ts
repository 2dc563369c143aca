import type { MikroORM } from '@mikro-orm/postgresql';
import type { ApiKeyEndpointState } from '@billing/contracts';
import { createClient, PLATFORM_SCOPE, scopeOfMerchant, type CallScope, type ServiceClient } from '@billing/service-runtime';
import type { ApiKeyEndpointState__Output } from '@billing/proto-types/identity/v1/ApiKeyEndpointState';
import { applyEndpointStates, catchUpEndpoints, type EndpointChange } from './endpoint-changes.js';
import { Endpoint } from './endpoint.js';

/** Reads a key's committed endpoint state from identity; rejects with not_found for a key the scope does not reach. */
export interface EndpointStateSource {
  read(scope: CallScope, apiKeyId: string): Promise<EndpointChange>;
}

export interface SyncResult {
  /** The key's version the copy holds now. */
  version: number;
  /** Whether this call stored the state (false: the copy held it or a newer one already). */
  applied: boolean;
  /** Deliveries created by the catch-up of a change that made the endpoint live. */
  caughtUp: number;
}

/**
 * Brings the copy of one key's endpoint up to identity's committed state now, instead of when
 * the change's `api_key.*` event arrives: the same version guard and side effects as ingesting
 * that event (`applyEndpointStates`, `catchUpEndpoints`), so whichever of the two comes second
 * changes nothing.
 */
export async function syncEndpoint(orm: MikroORM, source: EndpointStateSource, scope: CallScope, apiKeyId: string): Promise<SyncResult> {
  const change = await source.read(scope, apiKeyId);
  return orm.em.fork().transactional(async (em) => {
    const applied = await applyEndpointStates(em, [change.state]);
    const caughtUp = await catchUpEndpoints(em, [change], applied);
    const stored = await em.findOneOrFail(Endpoint, { apiKeyId: change.state.apiKeyId });
    return { version: stored.version, applied: applied.length > 0, caughtUp };
  });
}

/**
 * `EndpointStateSource` over identity's `identity.v1.ApiKeyEndpoints`. With `gather`, the reads
 * of one event-loop turn (a batch of `api_key.*` events names a key each) go to identity as one
 * gathered call, which identity answers with one query (see `apiKeyEndpointsGrpc`).
 */
export class IdentityEndpointStates implements EndpointStateSource {
  private readonly client: ServiceClient<'identity.v1.ApiKeyEndpoints'>;

  constructor(identityAddress: string, opts: { gather?: boolean; deadlineMs?: number } = {}) {
    this.client = createClient('identity.v1.ApiKeyEndpoints', identityAddress, opts.deadlineMs ?? 5000, { gather: opts.gather ?? false });
  }

  async read(scope: CallScope, apiKeyId: string): Promise<EndpointChange> {
    const res = await this.client.GetApiKeyEndpointState({ scope: scope.kind === 'merchant' ? scopeOfMerchant(scope.merchantId) : PLATFORM_SCOPE, apiKeyId });
    return { state: toEndpointState(res), occurredAt: res.changedAt };
  }

  close(): void {
    this.client.close();
  }
}

export function toEndpointState(m: ApiKeyEndpointState__Output): ApiKeyEndpointState {
  return {
    apiKeyId: m.apiKeyId,
    merchantId: m.merchantId,
    webhookUrl: m.webhookUrl ?? null,
    webhookEvents: m.webhookEventsAll ? null : m.webhookEvents,
    webhookEnabled: m.webhookEnabled,
    revoked: m.revoked,
    version: m.version,
  };
}
