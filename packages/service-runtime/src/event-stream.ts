import { DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { EVENT_SUBJECT_PREFIX, EVENTS_STREAM } from '@billing/contracts';

/** How long JetStream remembers a `Nats-Msg-Id` to drop a re-published duplicate. */
export const EVENTS_DUPLICATE_WINDOW_MS = 2 * 60_000;
/** How long events stay in the stream (consumers that fall further behind than this lose them). */
export const EVENTS_MAX_AGE_MS = 7 * 24 * 3600_000;

/** The `EVENTS` stream: every integration event, on disk, de-duplicated on `Nats-Msg-Id`. */
export const EVENTS_STREAM_CONFIG: Partial<StreamConfig> & { name: string; subjects: string[] } = {
  name: EVENTS_STREAM,
  subjects: [`${EVENT_SUBJECT_PREFIX}>`],
  storage: StorageType.File,
  retention: RetentionPolicy.Limits,
  discard: DiscardPolicy.Old,
  max_age: nanos(EVENTS_MAX_AGE_MS),
  duplicate_window: nanos(EVENTS_DUPLICATE_WINDOW_MS),
  num_replicas: 1,
};

/**
 * Creates the stream, or brings an existing one to the current configuration. Idempotent and
 * safe to run from every replica of every service at start-up.
 */
export async function ensureEventsStream(jsm: JetStreamManager): Promise<void> {
  try {
    // Creating a stream that exists with the same configuration succeeds.
    await jsm.streams.add(EVENTS_STREAM_CONFIG);
  } catch (e) {
    if (!(e instanceof JetStreamApiError && e.code === STREAM_NAME_IN_USE)) throw e;
    const { name, storage: _storage, num_replicas: _replicas, ...updatable } = EVENTS_STREAM_CONFIG;
    await jsm.streams.update(name, updatable);
  }
}

/** JetStream API error: the stream exists with a different configuration. */
const STREAM_NAME_IN_USE = 10058;
