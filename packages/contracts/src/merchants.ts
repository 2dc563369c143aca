import { z } from 'zod';
import { DateTime, NonBlankText, Email, Uuid } from './common.js';

export const PROVIDER_ENVIRONMENTS = ['Staging', 'Production'] as const;
export const BILLING_TERMINAL_ACTIONS = ['Cancel', 'Pause'] as const;
export const DEFAULT_RETRY_OFFSETS_DAYS = '1,3,7';

/** The day offsets of a RetryOffsetsDays value as written (spaces around each dropped). */
const offsetsOf = (s: string) => s.split(',').map((d) => d.trim());

/**
 * Comma-separated, strictly ascending positive day offsets, e.g. "1,3,7"; spaces around the
 * numbers are allowed ("1, 3, 7") and dropped when stored (`canonicalRetryOffsets`); at most 64
 * characters (what storage holds).
 */
export const RetryOffsetsDays = z
  .string()
  .max(64, 'Must be at most 64 characters.')
  .regex(/^ *\d+ *(, *\d+ *)*$/, { message: 'Must be comma-separated whole days, e.g. "1,3,7".', abort: true })
  .refine((s) => offsetsOf(s).every((d) => d.length <= 3), { message: 'Each offset must be at most 999 days.', abort: true })
  .refine((s) => {
    const days = offsetsOf(s).map(Number);
    return days.every((d, i) => d > 0 && (i === 0 || d > days[i - 1]!));
  }, 'Offsets must be positive and strictly ascending.');

/** A valid RetryOffsetsDays value as stored and answered: "1, 3, 7" → "1,3,7". */
export const canonicalRetryOffsets = (s: string): string => offsetsOf(s).map(Number).join(',');

const isTimeZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

/** Platform fee percentage: 0 to 100 with at most 4 decimals (1.5 = 1.5 %). */
export const FeePercent = z
  .union([z.number(), z.string()])
  .refine((v) => /^\d{1,3}(\.\d{1,4})?$/.test(String(v)) && Number(v) <= 100, 'Must be a percentage from 0 to 100 with at most 4 decimals.')
  .meta({ description: 'Platform fee percentage of each charge, 0 to 100 with at most 4 decimals (1.5 = 1.5 %), e.g. 1.5 or "1.5".' });
/** Fixed platform fee per charge in major units (0.30): 0 to 999999.99, at most 2 decimals. */
export const FeeFixed = z
  .union([z.number(), z.string()])
  .refine((v) => /^\d{1,6}(\.\d{1,2})?$/.test(String(v)), 'Must be an amount from 0 to 999999.99 with at most 2 decimals.')
  .meta({ description: "Fixed platform fee per charge in major units of the charge's currency, 0 to 999999.99 with at most 2 decimals, e.g. 0.30 or \"0.30\"." });

const Description = z.string().max(2000);
const ContactPhone = z.string().max(50);
const Country = z.string().regex(/^[A-Z]{2}$/, 'Must be an ISO 3166-1 alpha-2 code.');
const TimeZone = z.string().refine(isTimeZone, 'Must be an IANA time zone.');

export const CreateMerchantRequest = z
  .object({
    name: NonBlankText(200),
    contactEmail: Email,
    description: Description.nullish(),
    contactPhone: ContactPhone.nullish(),
    country: Country.nullish(),
    timeZone: TimeZone.nullish(),
    billingRetryOffsetsDays: RetryOffsetsDays.nullish(),
    billingTerminalAction: z.enum(BILLING_TERMINAL_ACTIONS).nullish(),
    bankSettlementWindowDays: z.number().int().min(0).max(30).nullish(),
    /** Platform fee per settled charge: percentage (default 1.5) plus fixed amount (default 0.30). */
    platformFeePercent: FeePercent.nullish(),
    platformFeeFixed: FeeFixed.nullish(),
  })
  .meta({ id: 'CreateMerchantRequest' });
export type CreateMerchantRequest = z.infer<typeof CreateMerchantRequest>;

/** Credentials are write-only; an absent or null field leaves the stored value unchanged. */
export const UpdateProviderRequest = z
  .object({
    id: Uuid.nullish(),
    providerEnvironment: z.enum(PROVIDER_ENVIRONMENTS).nullish(),
    gatewayUsername: z.string().min(1).max(256).nullish(),
    gatewayPassword: z.string().min(1).max(256).nullish(),
    merchantGuid: z.string().min(1).max(256).nullish(),
  })
  .meta({ id: 'UpdateProviderRequest' });
export type UpdateProviderRequest = z.infer<typeof UpdateProviderRequest>;

/**
 * A merchant field an update cannot change: 400 naming it when given (not null), rather than a
 * 200 that silently changed nothing. Read-only state, and the provider settings, which have
 * their own endpoint.
 */
const NotUpdated = (message: string) =>
  z
    .unknown()
    .refine((v) => v === undefined || v === null, message)
    .optional()
    .meta({ description: `400 when given (not null): ${message}` });
const READ_ONLY = 'Cannot be changed: it is maintained by the platform.';
const PROVIDER_SETTING = 'Set with PUT /api/admin/merchants/{id}/provider.';

/**
 * Platform admin: a merchant's profile and billing terms; absent or null fields are unchanged.
 * A body that is not a JSON object is 400 (`$`); the merchant's other fields are refused by name
 * (`NotUpdated`); names that are no field of a merchant are ignored.
 */
export const UpdateMerchantRequest = z
  .object(
    {
      id: Uuid.nullish(),
      name: NonBlankText(200).nullish(),
      contactEmail: Email.nullish(),
      description: Description.nullish(),
      contactPhone: ContactPhone.nullish(),
      country: Country.nullish(),
      timeZone: TimeZone.nullish(),
      platformFeePercent: FeePercent.nullish(),
      platformFeeFixed: FeeFixed.nullish(),
      billingRetryOffsetsDays: RetryOffsetsDays.nullish(),
      billingTerminalAction: z.enum(BILLING_TERMINAL_ACTIONS).nullish(),
      bankSettlementWindowDays: z.number().int().min(0).max(30).nullish(),
      isActive: NotUpdated(READ_ONLY),
      gatewayConfigured: NotUpdated(READ_ONLY),
      merchantGuidConfigured: NotUpdated(READ_ONLY),
      providerMerchantProfileId: NotUpdated(READ_ONLY),
      createdAt: NotUpdated(READ_ONLY),
      updatedAt: NotUpdated(READ_ONLY),
      providerEnvironment: NotUpdated(PROVIDER_SETTING),
      gatewayUsername: NotUpdated(PROVIDER_SETTING),
      gatewayPassword: NotUpdated(PROVIDER_SETTING),
      merchantGuid: NotUpdated(PROVIDER_SETTING),
    },
    { error: 'Must be a JSON object.' },
  )
  .meta({ id: 'UpdateMerchantRequest' });
export type UpdateMerchantRequest = z.infer<typeof UpdateMerchantRequest>;

/** A text field of the merchant's profile: the empty string when it was never given, never null. */
const ProfileText = z.string().meta({ description: 'Empty when not set; never null.' });

export const CurrentMerchant = z
  .object({
    id: Uuid,
    name: z.string(),
    description: ProfileText,
    contactEmail: z.string(),
    contactPhone: ProfileText,
    country: ProfileText,
    timeZone: ProfileText,
    isActive: z.boolean(),
    gatewayConfigured: z.boolean(),
    createdAt: DateTime,
    updatedAt: DateTime,
  })
  .meta({ id: 'CurrentMerchant' });
export type CurrentMerchant = z.infer<typeof CurrentMerchant>;

export const Merchant = CurrentMerchant.extend({
  providerEnvironment: z.enum(PROVIDER_ENVIRONMENTS),
  merchantGuidConfigured: z.boolean(),
  providerMerchantProfileId: z.string().meta({ description: 'Empty until gateway credentials are configured; never null.' }),
  billingRetryOffsetsDays: z.string(),
  billingTerminalAction: z.enum(BILLING_TERMINAL_ACTIONS),
  bankSettlementWindowDays: z.number().int(),
  /** Platform fee per settled charge: this percentage (rounded half-even to the cent) plus platformFeeFixed. */
  platformFeePercent: z.number(),
  platformFeeFixed: z.number(),
}).meta({ id: 'Merchant' });
export type Merchant = z.infer<typeof Merchant>;

export function toCurrentMerchant(m: Merchant): CurrentMerchant {
  const { id, name, description, contactEmail, contactPhone, country, timeZone, isActive, gatewayConfigured, createdAt, updatedAt } = m;
  return { id, name, description, contactEmail, contactPhone, country, timeZone, isActive, gatewayConfigured, createdAt, updatedAt };
}
