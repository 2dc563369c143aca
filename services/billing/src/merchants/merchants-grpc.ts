import type { MikroORM } from '@mikro-orm/postgresql';
import { BILLING_TERMINAL_ACTIONS, CreateMerchantRequest, DomainError, FeePercent, isUuidText, parseOrThrow, RetryOffsetsDays, UpdateProviderRequest } from '@billing/contracts';
import { z } from 'zod';
import type { Merchant__Output as MerchantMessage } from '@billing/proto-types/billing/v1/Merchant';
import { requirePlatformScope, requireScope, type SecretBox, type ServiceImpl } from '@billing/service-runtime';
import { Merchant } from './merchant.js';
import { MerchantReader } from './merchant-reader.js';

/** Merchant as the proto message: nullable strings become absent fields. */
export function toMerchantMessage(v: ReturnType<Merchant['toView']>): MerchantMessage {
  return {
    id: v.id,
    name: v.name ?? '',
    description: v.description ?? undefined,
    contactEmail: v.contactEmail ?? '',
    contactPhone: v.contactPhone ?? undefined,
    country: v.country ?? undefined,
    timeZone: v.timeZone ?? undefined,
    isActive: v.isActive,
    gatewayConfigured: v.gatewayConfigured,
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    providerEnvironment: v.providerEnvironment,
    merchantGuidConfigured: v.merchantGuidConfigured,
    providerMerchantProfileId: v.providerMerchantProfileId ?? undefined,
    billingRetryOffsetsDays: v.billingRetryOffsetsDays,
    billingTerminalAction: v.billingTerminalAction,
    bankSettlementWindowDays: v.bankSettlementWindowDays,
    platformFeePercent: v.platformFeePercent,
    platformFeeFixedMinor: String(v.platformFeeFixedMinor), // int64 travels as a decimal string
  };
}

export function merchantsGrpc(orm: MikroORM, box: SecretBox): ServiceImpl<'billing.v1.Merchants'> {
  const reader = new MerchantReader(orm);
  return {
    CreateMerchant: async (req) => {
      requirePlatformScope(req.scope);
      const input = parseOrThrow(CreateMerchantRequest, req);
      const merchant = Merchant.create({ ...input, platformFeeFixedMinor: feeFixedMinor(req.platformFeeFixedMinor) });
      await orm.em.fork().persistAndFlush(merchant);
      return toMerchantMessage(merchant.toView());
    },

    /** A merchant scope reads only itself: another merchant is merchant_not_found, like a missing one. */
    GetMerchant: async (req) => {
      const scope = requireScope(req.scope);
      const own = scope.kind === 'platform' || scope.merchantId === req.id.toLowerCase();
      const merchant = own && isUuidText(req.id) ? await reader.load(req.id) : null;
      if (!merchant) throw new DomainError('merchant_not_found', 'Merchant not found.');
      return toMerchantMessage(merchant.toView());
    },

    ListMerchants: async (req) => {
      requirePlatformScope(req.scope);
      const [items, total] = await orm.em.fork().findAndCount(Merchant, {}, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: req.pageSize, offset: (req.page - 1) * req.pageSize });
      return { items: items.map((m) => toMerchantMessage(m.toView())), totalCount: total };
    },

    UpdateBillingTerms: async (req) => {
      requirePlatformScope(req.scope);
      const change = parseOrThrow(MerchantChange, req);
      const fixed = feeFixedMinor(req.platformFeeFixedMinor);
      return orm.em.fork().transactional(async (em) => {
        const merchant = isUuidText(req.id) ? await em.findOne(Merchant, { id: req.id.toLowerCase() }, { lockMode: 4 }) : null;
        if (!merchant) throw new DomainError('merchant_not_found', 'Merchant not found.');
        const now = new Date();
        merchant.updateProfile(change, now);
        merchant.updateBillingTerms({ ...change, platformFeeFixedMinor: fixed }, now);
        return toMerchantMessage(merchant.toView());
      });
    },

    UpdateProvider: async (req) => {
      requirePlatformScope(req.scope);
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

/** What an update may change (each absent or null when unchanged), checked as on create. */
const MerchantChange = CreateMerchantRequest.pick({ description: true, contactPhone: true, country: true, timeZone: true }).extend({
  name: CreateMerchantRequest.shape.name.nullish(),
  contactEmail: CreateMerchantRequest.shape.contactEmail.nullish(),
  platformFeePercent: FeePercent.nullish(),
  billingRetryOffsetsDays: RetryOffsetsDays.nullish(),
  billingTerminalAction: z.enum(BILLING_TERMINAL_ACTIONS).nullish(),
  bankSettlementWindowDays: z.number().int().min(0).max(30).nullish(),
});

function feeFixedMinor(value: string | number | null | undefined): number | null {
  if (value == null) return null;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw DomainError.field('platformFeeFixed', 'Must be a non-negative amount.');
  return n;
}
