import type { MikroORM } from '@mikro-orm/postgresql';
import { DELIVERY_STATUSES, DomainError, isUuidText, pageWindow, type DeliveryStatus } from '@billing/contracts';
import { merchantFilter, requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { Endpoint } from '../endpoints/endpoint.js';
import { Attempt, Delivery, Replay } from './delivery.js';

function toAttemptMessage(a: Attempt) {
  return {
    id: a.id,
    attemptedAt: a.attemptedAt.toISOString(),
    trigger: a.trigger,
    statusCode: a.statusCode ?? undefined,
    durationMs: a.durationMs,
    error: a.error ?? undefined,
    responseBody: a.responseBody ?? undefined,
  };
}

function toDeliveryMessage(d: Delivery, attempts: Attempt[]) {
  return {
    id: d.id,
    merchantId: d.merchantId,
    eventId: d.eventId,
    eventType: d.eventType,
    apiKeyId: d.apiKeyId,
    url: d.url,
    status: d.status,
    attemptCount: attempts.length,
    nextAttemptAt: d.status === 'Pending' ? d.nextAttemptAt?.toISOString() : undefined,
    createdAt: d.createdAt.toISOString(),
    attempts: attempts.map(toAttemptMessage),
  };
}

async function attemptsOf(orm: MikroORM, ids: string[]): Promise<Map<string, Attempt[]>> {
  const out = new Map<string, Attempt[]>(ids.map((id) => [id, []]));
  if (!ids.length) return out;
  const attempts = await orm.em.fork().find(Attempt, { deliveryId: { $in: ids } }, { orderBy: { attemptedAt: 'asc', id: 'asc' } });
  for (const a of attempts) out.get(a.deliveryId)!.push(a);
  return out;
}

/** A delivery addressed by id: another merchant's is indistinguishable from a missing one. */
async function findDelivery(orm: MikroORM, scope: CallScope, id: string): Promise<Delivery> {
  if (!isUuidText(id)) throw new DomainError('not_found', 'Webhook delivery not found.');
  const where = { id: id.toLowerCase(), ...merchantFilter(scope) };
  const d = await orm.em.fork().findOne(Delivery, where);
  if (!d) throw new DomainError('not_found', 'Webhook delivery not found.');
  return d;
}

/** The order of `ListDeliveries`, newest first, which its indexes by merchant (and status) hold. */
export const DELIVERY_LIST_ORDER = { createdAt: 'desc', id: 'asc' } as const;

/** `webhooks.v1.WebhookDeliveries`: reads of deliveries with their attempts, and manual replays. */
export function deliveriesGrpc(orm: MikroORM, scheduler: { nudge(): void }): ServiceImpl<'webhooks.v1.WebhookDeliveries'> {
  return {
    ListDeliveries: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      if (req.status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(req.status)) throw DomainError.field('status', 'Must be one of Pending, Succeeded, Failed.');
      const where: { merchantId: string; status?: DeliveryStatus; eventType?: string } = { merchantId };
      if (req.status) where.status = req.status as DeliveryStatus;
      if (req.eventType) where.eventType = req.eventType;
      const [items, total] = await orm.em.fork().findAndCount(Delivery, where, { orderBy: DELIVERY_LIST_ORDER, ...pageWindow(req) });
      const attempts = await attemptsOf(orm, items.map((d) => d.id));
      return { items: items.map((d) => toDeliveryMessage(d, attempts.get(d.id)!)), totalCount: total };
    },

    GetDelivery: async (req) => {
      const d = await findDelivery(orm, requireScope(req.scope), req.id);
      return toDeliveryMessage(d, (await attemptsOf(orm, [d.id])).get(d.id)!);
    },

    ReplayDelivery: async (req) => {
      const d = await findDelivery(orm, requireScope(req.scope), req.id);
      const endpoint = await orm.em.fork().findOne(Endpoint, { apiKeyId: d.apiKeyId });
      if (endpoint?.revoked) throw new DomainError('conflict', "The delivery's API key is revoked.");
      // A replay goes to the key's current URL; a key whose URL was removed has nowhere to send
      // it, and the delivery's last URL is one the merchant took away.
      if (endpoint && !endpoint.url) throw new DomainError('conflict', "The delivery's API key has no webhook URL.");
      const replay = Object.assign(new Replay(), { deliveryId: d.id });
      await orm.em.fork().persistAndFlush(replay);
      scheduler.nudge();
      return { attemptId: replay.id };
    },
  };
}
