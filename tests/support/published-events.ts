import type pg from 'pg';
import type { z } from 'zod';
import { isWebhookEventType, WEBHOOK_EVENT_DATA, type EventType } from '@billing/contracts';

/**
 * Every webhook event the services published on this database (their outboxes), checked against
 * the `data` schema of its type that the API reference publishes, strictly: a field no schema
 * names is undocumented, a required field left out breaks consumers. Returns one line per kind of
 * mismatch (empty when all match) and the event types seen, so a caller can show it was not vacuous.
 */
export async function eventsAgainstPublishedSchemas(db: pg.Client): Promise<{ mismatches: string[]; types: Set<string> }> {
  const rows = (
    await db.query(`select type, data from billing.outbox union all select type, data from checkout.outbox union all select type, data from identity.outbox`)
  ).rows as { type: string; data: unknown }[];
  const events = rows.filter((r) => isWebhookEventType(r.type));
  const mismatches = new Set<string>();
  for (const e of events) {
    const parsed = (WEBHOOK_EVENT_DATA[e.type as EventType] as z.ZodObject).strict().safeParse(e.data);
    if (!parsed.success) {
      for (const i of parsed.error.issues) mismatches.add(`${e.type}: ${i.path.join('.') || '(data)'}: ${i.message}`);
    }
  }
  return { mismatches: [...mismatches], types: new Set(events.map((e) => e.type)) };
}
