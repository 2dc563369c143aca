import { randomUUID } from 'node:crypto';
import { UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { context, propagation, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { invalidTextError, openDatabase, recordEvent, SecretBox, sha256Hex } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import { MIGRATIONS } from '../migrations/index.js';
import { ApiKey, ApiKeySchema } from './api-key.js';
import { ApiKeyStore } from './api-key-store.js';
import { apiKeyEndpointsGrpc } from './api-key-endpoints-grpc.js';
import { apiKeysGrpc } from './api-keys-grpc.js';
import { webhookSigningGrpc } from './webhook-signing-grpc.js';

// Create-API-key's hand-written statement against a real Postgres database of its own: it must
// write exactly the rows the ORM wrote for a created key and its `api_key.created` event.

const { orm, rows } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'identity', entities: ENTITIES, poolMax: 10 }),
  schema: 'identity',
  migrations: MIGRATIONS,
});
const box = new SecretBox('an encryption key for these tests only', 'identity/api-key-signing-secrets');

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});

afterAll(() => {
  context.disable();
  propagation.disable();
});

/** Runs `fn` in a sampled trace of its own, as a traced gRPC call would. */
const inTrace = <T>(traceId: string, fn: () => T): T =>
  context.with(trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: 'b'.repeat(16), traceFlags: TraceFlags.SAMPLED }), fn);

const traceIdOf = (i: number) => (i + 1).toString(16).padStart(32, 'c');

/** The gRPC call object, which these handlers never read. */
const NO_CALL = undefined as never;

/**
 * Minted keys, some with every optional field set and every instant distinct (a store that
 * swapped two columns would be seen), names that need escaping in JSON.
 */
function mintKeys(merchantId: string): ApiKey[] {
  const at = (ms: number) => new Date(Date.UTC(2026, 10, 22, 10, 0, 0, ms));
  const plain = [0, 1, 2, 3].map((i) => ApiKey.mint({ merchantId, name: `key ${i}`, expiresAt: null }, box).apiKey);
  const full = ApiKey.mint({ merchantId, name: `Zoë's "key" 🔑 \\ {"x":1}`, expiresAt: at(1) }, box).apiKey;
  Object.assign(full, { webhookUrl: 'https://hooks.example.com/a?b=c', webhookEvents: ['member.created', 'subscription.created'], webhookEnabled: true, lastUsedAt: at(2), revokedAt: at(3), createdAt: at(4), updatedAt: at(5), version: 7 });
  const noEvents = ApiKey.mint({ merchantId, name: 'no events', expiresAt: at(6) }, box).apiKey;
  Object.assign(noEvents, { webhookEvents: [] });
  return [...plain, full, noEvents];
}

/** Every property of the entity, as the ORM loads it. */
const fieldsOf = (k: ApiKey) => Object.fromEntries(Object.keys(ApiKeySchema.meta.properties).map((p) => [p, k[p as keyof ApiKey]]));

/** The stored rows of these keys and of their events as Postgres holds them, without the outbox's own id and sequence number. */
async function storedRows(ids: string[]) {
  const keys = await rows<{ row: Record<string, unknown> }>(`select to_jsonb(k) as row from identity.api_keys k where k.id in (?) order by k.id`, [ids]);
  const events = await rows<{ row: Record<string, unknown> }>(
    `select to_jsonb(o) - 'id' - 'seq' as row from identity.outbox o where o.data->>'apiKeyId' in (?) order by o.data->>'apiKeyId'`,
    [ids],
  );
  return { keys: keys.map((r) => r.row), events: events.map((r) => r.row) };
}

describe('ApiKeyStore.insertCreated', () => {
  it('writes, for concurrent creates, the api_keys and outbox rows the ORM writes, each event with its own request trace', async () => {
    const keys = mintKeys(randomUUID());
    const ids = keys.map((k) => k.id);

    // What the ORM path (persist and recordEvent in one transaction) writes for these keys ...
    await orm().em.fork().transactional(async (em) => {
      keys.forEach((k, i) =>
        inTrace(traceIdOf(i), () => {
          em.persist(k);
          recordEvent(em, { type: 'api_key.created', merchantId: k.merchantId, data: k.endpointState(), occurredAt: k.updatedAt });
        }),
      );
    });
    const byOrm = await storedRows(ids);
    expect(byOrm.keys).toHaveLength(keys.length);
    expect(byOrm.events).toHaveLength(keys.length);
    await rows(`delete from identity.outbox where data->>'apiKeyId' in (?)`, [ids]);
    await rows(`delete from identity.api_keys where id in (?)`, [ids]);

    // ... is what the store writes for them, arriving together.
    const store = new ApiKeyStore(orm());
    await Promise.all(keys.map((k, i) => inTrace(traceIdOf(i), () => store.insertCreated(k))));
    const byStore = await storedRows(ids);
    expect(byStore).toEqual(byOrm);
    const traceparents = new Map(byStore.events.map((e) => [(e.data as { apiKeyId: string }).apiKeyId, (e.trace_context as { traceparent?: string }).traceparent]));
    expect(traceparents).toEqual(new Map(ids.map((id, i) => [id, `00-${traceIdOf(i)}-${'b'.repeat(16)}-01`])));

    // Loaded through the ORM, every field is the minted entity's.
    const loaded = await orm().em.fork().find(ApiKey, { id: { $in: ids } });
    expect(new Map(loaded.map((k) => [k.id, fieldsOf(k)]))).toEqual(new Map(keys.map((k) => [k.id, fieldsOf(k)])));

    // The relay publishes in `seq` order: the order the creates arrived in.
    const order = await rows<{ id: string }>(`select data->>'apiKeyId' as id from identity.outbox where data->>'apiKeyId' in (?) order by seq`, [ids]);
    expect(order.map((r) => r.id)).toEqual(ids);
  });

  it('fails only the key the database refuses, with the ORM\'s typed exception; the keys beside it and their events commit', async () => {
    const merchantId = randomUUID();
    const store = new ApiKeyStore(orm());
    const [taken, ...fresh] = [0, 1, 2].map((i) => ApiKey.mint({ merchantId, name: `key ${i}`, expiresAt: null }, box).apiKey);
    await store.insertCreated(taken!);
    const twin = Object.assign(ApiKey.mint({ merchantId, name: 'twin', expiresAt: null }, box).apiKey, { keyHash: taken!.keyHash });
    const outcomes = await Promise.allSettled([fresh[0]!, twin, fresh[1]!].map((k) => store.insertCreated(k)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(UniqueConstraintViolationException);
    expect(await rows(`select name from identity.api_keys where merchant_id = ? order by name`, [merchantId])).toEqual([{ name: 'key 0' }, { name: 'key 1' }, { name: 'key 2' }]);
    const events = await rows<{ id: string }>(`select data->>'apiKeyId' as id from identity.outbox where merchant_id = ?`, [merchantId]);
    expect(events.map((e) => e.id).sort()).toEqual([taken, ...fresh].map((k) => k!.id).sort());
  });
});

describe('CreateApiKey', () => {
  it('answers each of several concurrent creates with a key that authenticates and a signing secret that decrypts, announced by api_key.created', async () => {
    const merchantId = randomUUID();
    const scope = { kind: 'merchantId' as const, merchantId };
    const keysApi = apiKeysGrpc(orm(), box, { production: false });
    const signing = webhookSigningGrpc(orm(), box);
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const created = await Promise.all(
      Array.from({ length: 8 }, (_, i) => inTrace(traceIdOf(100 + i), () => keysApi.CreateApiKey({ scope, name: `concurrent ${i}`, expiresAt: i % 2 ? expiresAt : undefined }, NO_CALL))),
    );
    expect(new Set(created.map((c) => c.apiKey!.id)).size).toBe(8);

    for (const [i, c] of created.entries()) {
      const { apiKey } = c;
      expect(c.key).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
      expect(c.signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(apiKey).toMatchObject({ merchantId, name: `concurrent ${i}`, keyPrefix: c.key.slice(0, 11), signingSecretPrefix: c.signingSecret.slice(0, 12), webhookEnabled: false, webhookEventsAll: true });
      expect(apiKey!.expiresAt).toBe(i % 2 ? expiresAt : undefined);
      // The reply describes the stored key.
      expect(await keysApi.GetApiKey({ scope, id: apiKey!.id }, NO_CALL)).toEqual(apiKey);

      expect(await keysApi.AuthenticateApiKey({ keyHash: sha256Hex(c.key) }, NO_CALL)).toEqual({ found: true, id: apiKey!.id, merchantId, expiresAt: apiKey!.expiresAt, revokedAt: undefined });
      const secret = await signing.GetSigningSecret({ scope, apiKeyId: apiKey!.id }, NO_CALL);
      expect(secret.signingSecret).toBe(c.signingSecret);

      const [event] = await rows(
        `select o.type, o.merchant_id, o.data, o.occurred_at = k.updated_at as at_key_update, o.trace_context, o.published_at
           from identity.outbox o join identity.api_keys k on k.id = (o.data->>'apiKeyId')::uuid
          where k.id = ?`,
        [apiKey!.id],
      );
      expect(event).toEqual({
        type: 'api_key.created',
        merchant_id: merchantId,
        data: { apiKeyId: apiKey!.id, merchantId, webhookUrl: null, webhookEvents: null, webhookEnabled: false, revoked: false, version: 1 },
        at_key_update: true,
        trace_context: { traceparent: `00-${traceIdOf(100 + i)}-${'b'.repeat(16)}-01` },
        published_at: null,
      });
    }
  });

  it('refuses a name Postgres cannot store as a bad request, writing nothing of it; the creates beside it commit', async () => {
    const merchantId = randomUUID();
    const scope = { kind: 'merchantId' as const, merchantId };
    const keysApi = apiKeysGrpc(orm(), box, { production: false });
    const outcomes = await Promise.allSettled(['before', 'nul \u0000 inside', 'after'].map((name) => keysApi.CreateApiKey({ scope, name }, NO_CALL)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(invalidTextError((outcomes[1] as PromiseRejectedResult).reason)?.code).toBe('bad_request');
    expect(await rows(`select name from identity.api_keys where merchant_id = ? order by name`, [merchantId])).toEqual([{ name: 'after' }, { name: 'before' }]);
    expect(await rows(`select id from identity.outbox where merchant_id = ?`, [merchantId])).toHaveLength(2);
  });

  it('validates before writing: a blank name or a past expiry fails validation and stores nothing', async () => {
    const merchantId = randomUUID();
    const scope = { kind: 'merchantId' as const, merchantId };
    const keysApi = apiKeysGrpc(orm(), box, { production: false });
    for (const req of [{ scope, name: '   ' }, { scope, name: 'expired', expiresAt: '2020-01-01T00:00:00.000Z' }]) {
      const err = await keysApi.CreateApiKey(req, NO_CALL).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DomainError);
      expect((err as DomainError).code).toBe('validation_failed');
    }
    expect(await rows(`select id from identity.api_keys where merchant_id = ?`, [merchantId])).toHaveLength(0);
    expect(await rows(`select id from identity.outbox where merchant_id = ?`, [merchantId])).toHaveLength(0);
  });
});

describe('GetApiKeyEndpointState', () => {
  it('answers concurrent reads (one batch), each as the ORM-loaded key states it and only in its own scope', async () => {
    const merchantId = randomUUID();
    const keys = mintKeys(merchantId);
    await orm().em.fork().persistAndFlush(keys);
    const endpoints = apiKeyEndpointsGrpc(orm());
    const own = { kind: 'merchantId' as const, merchantId };
    const other = { kind: 'merchantId' as const, merchantId: randomUUID() };
    const platform = { kind: 'platform' as const, platform: {} };
    const reads = [
      ...keys.map((k) => ({ scope: own, apiKeyId: k.id })),
      ...keys.map((k) => ({ scope: platform, apiKeyId: k.id.toUpperCase() })),
      { scope: other, apiKeyId: keys[0]!.id },
      { scope: own, apiKeyId: randomUUID() },
      { scope: own, apiKeyId: 'not-a-uuid' },
    ];
    const answers = await Promise.allSettled(reads.map((r) => endpoints.GetApiKeyEndpointState(r, NO_CALL)));

    const stateOf = (k: ApiKey) => {
      const s = k.endpointState();
      const expected = { apiKeyId: s.apiKeyId, merchantId: s.merchantId, webhookEventsAll: s.webhookEvents === null, webhookEvents: s.webhookEvents ?? [], webhookEnabled: s.webhookEnabled, revoked: s.revoked, version: s.version, changedAt: k.updatedAt.toISOString() };
      return s.webhookUrl === null ? expected : { ...expected, webhookUrl: s.webhookUrl };
    };
    const expected = [...keys, ...keys].map(stateOf);
    expect(answers.slice(0, expected.length).map((a) => (a.status === 'fulfilled' ? a.value : a.reason))).toEqual(expected);
    for (const refused of answers.slice(expected.length)) {
      expect(refused.status).toBe('rejected');
      expect(((refused as PromiseRejectedResult).reason as DomainError).code).toBe('not_found');
    }
    // The full key's state is not the defaults: a store that read the wrong column would be seen.
    expect(answers[4]).toMatchObject({ value: { webhookUrl: 'https://hooks.example.com/a?b=c', webhookEvents: ['member.created', 'subscription.created'], revoked: true, version: 7 } });
  });
});
