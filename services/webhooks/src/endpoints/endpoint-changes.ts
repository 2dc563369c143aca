import type { EntityManager } from '@mikro-orm/postgresql';
import type { ApiKeyEndpointState } from '@billing/contracts';
import { queryRows } from '@billing/service-runtime';
import { Endpoint, newestStates } from './endpoint.js';

/**
 * A key's endpoint state and when it was made (its `api_key.*` event's `occurredAt`, which is
 * identity's time of the change).
 */
export interface EndpointChange {
  state: ApiKeyEndpointState;
  occurredAt: string;
}

/**
 * Applies endpoint states to the copy in the caller's transaction, whether they came as
 * `api_key.*` events or were read from identity (`syncEndpoint`): per key only the newest of
 * them, and only over an older version. A revoked key's Pending deliveries fail. Returns the
 * states it stored (to pass to `catchUpEndpoints`).
 */
export async function applyEndpointStates(em: EntityManager, changes: ApiKeyEndpointState[]): Promise<ApiKeyEndpointState[]> {
  const states = newestStates(changes);
  if (!states.length) return [];
  const updated = await queryRows<{ api_key_id: string }>(
    em,
    `insert into "endpoints" ("api_key_id", "merchant_id", "url", "event_types", "enabled", "revoked", "version", "updated_at")
     select s."api_key_id", s."merchant_id", s."url", nullif(s."event_types", 'null'::jsonb), s."enabled", s."revoked", s."version", now()
       from jsonb_to_recordset(?::jsonb) as s("api_key_id" uuid, "merchant_id" uuid, "url" text, "event_types" jsonb, "enabled" boolean, "revoked" boolean, "version" int)
     on conflict ("api_key_id") do update set
       "merchant_id" = excluded."merchant_id", "url" = excluded."url", "event_types" = excluded."event_types", "enabled" = excluded."enabled",
       "revoked" = excluded."revoked", "version" = excluded."version", "updated_at" = excluded."updated_at"
     where "endpoints"."version" < excluded."version"
     returning "api_key_id"`,
    [JSON.stringify(states.map((s) => ({ api_key_id: s.apiKeyId, merchant_id: s.merchantId, url: s.webhookUrl, event_types: s.webhookEvents, enabled: s.webhookEnabled, revoked: s.revoked, version: s.version })))],
  );
  const applied = new Set(updated.map((r) => r.api_key_id));
  // A revoked key's pending deliveries will never be attempted: they have failed.
  const revoked = states.filter((s) => s.revoked).map((s) => s.apiKeyId);
  if (revoked.length) {
    await queryRows(
      em,
      `update "deliveries" set "status" = 'Failed', "next_attempt_at" = null, "lease_until" = null, "updated_at" = now() where "api_key_id" = any(?::uuid[]) and "status" = 'Pending'`,
      [`{${revoked.join(',')}}`],
    );
  }
  return states.filter((s) => applied.has(s.apiKeyId));
}

/**
 * Events reach the bus from each service's own outbox, so an event can arrive before the
 * `api_key.*` event of a webhook change that happened earlier (an endpoint enabled, then at once
 * a member created: identity's relay may publish after billing's). Such an event found no
 * endpoint when it was ingested. When a change makes an endpoint live, every event of its
 * merchant already in the inbox that occurred at or after the change, and that it accepts, gets
 * its Pending delivery now (none twice: one per event and key); the scheduler starts them.
 * (The gateway's sync normally applies a change before any later event arrives; this covers a
 * failed sync, and events raised by others while the change was being answered.)
 * `changes`: a batch's `api_key.*` changes, or the one state a sync read with its time of change;
 * `applied`: the newest states of those keys that were stored. Returns how many were
 * created. (`received_at`, on this database's clock, only narrows the search to recent events on
 * its index; the five minutes allow for the services' clocks.)
 */
export async function catchUpEndpoints(em: EntityManager, changes: EndpointChange[], applied: ApiKeyEndpointState[]): Promise<number> {
  // Per key whose newest state this batch applied and that is live now: the earliest of this
  // batch's changes that left it live.
  const since = new Map<string, { state: ApiKeyEndpointState; since: string }>();
  const live = new Map(applied.filter(isLive).map((s) => [s.apiKeyId, s]));
  for (const c of changes) {
    const state = live.get(c.state.apiKeyId);
    if (!state || !isLive(c.state)) continue;
    const seen = since.get(state.apiKeyId);
    if (!seen || Date.parse(c.occurredAt) < Date.parse(seen.since)) since.set(state.apiKeyId, { state, since: c.occurredAt });
  }
  if (since.size === 0) return 0;
  const rows = [...since.values()].map(({ state, since }) => ({ api_key_id: state.apiKeyId, merchant_id: state.merchantId, url: state.webhookUrl, event_types: state.webhookEvents, since }));
  const created = await queryRows<{ id: string }>(
    em,
    `insert into "deliveries" ("id", "event_id", "event_type", "merchant_id", "api_key_id", "url", "status", "scheduled_attempts", "next_attempt_at", "lease_until", "created_at", "updated_at")
     select gen_random_uuid(), e."id", e."type", e."merchant_id", s."api_key_id", s."url", 'Pending', 0, now(), null, now(), now()
       from jsonb_to_recordset(?::jsonb) as s("api_key_id" uuid, "merchant_id" uuid, "url" text, "event_types" jsonb, "since" timestamptz)
       join "events" e on e."received_at" >= s."since" - interval '5 minutes' and e."merchant_id" = s."merchant_id" and e."occurred_at" >= s."since" and e."body" is not null
        and (nullif(s."event_types", 'null'::jsonb) is null or s."event_types" @> to_jsonb(e."type"))
     on conflict ("event_id", "api_key_id") do nothing
     returning "id"`,
    [JSON.stringify(rows)],
  );
  return created.length;
}

const isLive = (s: ApiKeyEndpointState) => Endpoint.fromState(s).isLive();
