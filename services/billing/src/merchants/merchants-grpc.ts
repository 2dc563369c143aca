import type { MikroORM } from '@mikro-orm/postgresql';
import { CreateMerchantRequest, DomainError, isUuidText, parseOrThrow, UpdateProviderRequest, type Merchant as MerchantView } from '@billing/contracts';
import type { Merchant as MerchantMessage } from '@billing/proto-types/billing/v1/Merchant';
import type { SecretBox, ServiceImpl } from '@billing/service-runtime';
import { Merchant } from './merchant.js';
import { MerchantReader } from './merchant-reader.js';

/** Merchant as the proto message: nullable strings become absent fields. */
export function toMerchantMessage(v: MerchantView): MerchantMessage {
  const out: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(v)) if (val !== null) out[k] = val;
  return out as MerchantMessage;
}

export function merchantsGrpc(orm: MikroORM, box: SecretBox): ServiceImpl<'billing.v1.Merchants'> {
  const reader = new MerchantReader(orm);
  return {
    CreateMerchant: async (req) => {
      const input = parseOrThrow(CreateMerchantRequest, req);
      const merchant = Merchant.create(input);
      await orm.em.fork().persistAndFlush(merchant);
      return toMerchantMessage(merchant.toView());
    },

    GetMerchant: async (req) => {
      const merchant = isUuidText(req.id) ? await reader.load(req.id) : null;
      if (!merchant) throw new DomainError('merchant_not_found', 'Merchant not found.');
      return toMerchantMessage(merchant.toView());
    },

    ListMerchants: async (req) => {
      const [items, total] = await orm.em.fork().findAndCount(Merchant, {}, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: req.pageSize, offset: (req.page - 1) * req.pageSize });
      return { items: items.map((m) => toMerchantMessage(m.toView())), totalCount: total };
    },

    UpdateProvider: async (req) => {
      const change = parseOrThrow(UpdateProviderRequest, req);
      return orm.em.fork().transactional(async (em) => {
        const merchant = await em.findOne(Merchant, { id: req.id }, { lockMode: 4 });
        if (!merchant) throw new DomainError('merchant_not_found', 'Merchant not found.');
        merchant.configureProvider(change, box);
        return toMerchantMessage(merchant.toView());
      });
    },
  };
}
