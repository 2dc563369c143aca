import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNats, type TestNats } from '../../../tests/support/nats.js';
import { AckedPublisher } from './acked-publisher.js';
import { natsServerOptions } from './nats.js';

// Against a real nats-server with JetStream: a stream of its own, `ackpub.>`.

const STREAM = 'ACKPUB_TEST';
let nats: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connect(natsServerOptions(nats.url));
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STREAM, subjects: ['ackpub.>'], duplicate_window: 60e9 });
}, 60_000);

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(STREAM).catch(() => undefined);
  await nc?.close();
  await nats?.stop();
});

const storedCount = async () => (await (await jetstreamManager(nc)).streams.info(STREAM)).state.messages;

describe('AckedPublisher', () => {
  it('resolves each publish once the stream stored it, in order, with its headers and Nats-Msg-Id', async () => {
    const publisher = new AckedPublisher(nc, 5000);
    const before = await storedCount();
    const ids = Array.from({ length: 50 }, () => randomUUID());
    await Promise.all(ids.map((id, i) => publisher.publish('ackpub.order', JSON.stringify({ i }), id, { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` })));
    expect(await storedCount()).toBe(before + 50);
    const jsm = await jetstreamManager(nc);
    const got: { i: number; id: string | undefined; traceparent: string | undefined }[] = [];
    for (let seq = before + 1; seq <= before + 50; seq++) {
      const m = (await jsm.streams.getMessage(STREAM, { seq }))!;
      got.push({ i: m.json<{ i: number }>().i, id: m.header.get('Nats-Msg-Id'), traceparent: m.header.get('traceparent') });
    }
    expect(got.map((g) => g.i)).toEqual(ids.map((_, i) => i));
    expect(got.map((g) => g.id)).toEqual(ids);
    expect(new Set(got.map((g) => g.traceparent))).toEqual(new Set([`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`]));
    publisher.close();
  });

  it('resolves a repeat of an id and the stream keeps one message (its duplicate window)', async () => {
    const publisher = new AckedPublisher(nc, 5000);
    const before = await storedCount();
    const id = randomUUID();
    await publisher.publish('ackpub.dup', '{}', id, {});
    await publisher.publish('ackpub.dup', '{}', id, {});
    expect(await storedCount()).toBe(before + 1);
    publisher.close();
  });

  it('fails a publish no stream takes (no responders)', async () => {
    const publisher = new AckedPublisher(nc, 5000);
    await expect(publisher.publish('nostream.here', '{}', randomUUID(), {})).rejects.toThrow(/JetStream publish failed: 503/);
    publisher.close();
  });

  it('fails a publish answered by something that is not a stream, and one not answered in time', async () => {
    // A plain subscriber takes the subject instead of a stream: it answers junk, or nothing.
    const junk = nc.subscribe('plain.junk', { callback: (_e, m) => m.respond('not json') });
    const silent = nc.subscribe('plain.silent', { callback: () => undefined });
    const publisher = new AckedPublisher(nc, 300);
    await expect(publisher.publish('plain.junk', '{}', randomUUID(), {})).rejects.toThrow(/not JSON/);
    const started = Date.now();
    await expect(publisher.publish('plain.silent', '{}', randomUUID(), {})).rejects.toThrow(/did not acknowledge within 300 ms/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    publisher.close();
    junk.unsubscribe();
    silent.unsubscribe();
  });

  it('fails what is still waiting when closed', async () => {
    const silent = nc.subscribe('plain.closing', { callback: () => undefined });
    const publisher = new AckedPublisher(nc, 60_000);
    const waiting = publisher.publish('plain.closing', '{}', randomUUID(), {});
    await nc.flush();
    publisher.close();
    await expect(waiting).rejects.toThrow(/closed before the stream answered/);
    silent.unsubscribe();
  });
});
