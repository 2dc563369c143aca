import { randomUUID } from 'node:crypto';
import { BigIntType, EntitySchema } from '@mikro-orm/postgresql';
import { canonicalRetryOffsets, DEFAULT_RETRY_OFFSETS_DAYS, type CreateMerchantRequest, type Merchant as MerchantView } from '@billing/contracts';
import type { SecretBox } from '@billing/service-runtime';
import { DEFAULT_FEE_TERMS, normalisePercent, type FeeTerms } from '../fees/platform-fee.js';

export type ProviderEnvironment = 'Staging' | 'Production';
export type TerminalAction = 'Cancel' | 'Pause';

/** Gateway credentials; sealed as one JSON document so they are never stored in the clear. */
interface ProviderCredentials {
  gatewayUsername?: string;
  gatewayPassword?: string;
  merchantGuid?: string;
}

export class Merchant {
  id: string = randomUUID();
  name!: string;
  description: string | null = null;
  contactEmail!: string;
  contactPhone: string | null = null;
  country: string | null = null;
  timeZone: string | null = null;
  isActive = true;
  providerEnvironment: ProviderEnvironment = 'Staging';
  providerCredentialsSealed: string | null = null;
  gatewayConfigured = false;
  merchantGuidConfigured = false;
  providerMerchantProfileId: string | null = null;
  billingRetryOffsetsDays: string = DEFAULT_RETRY_OFFSETS_DAYS;
  billingTerminalAction: TerminalAction = 'Cancel';
  bankSettlementWindowDays = 3;
  /** Platform fee per settled charge: exact decimal percentage plus hundredths of the charge currency's major unit (1.5 % + 30 for 0.30). */
  platformFeePercent: string = DEFAULT_FEE_TERMS.percent;
  platformFeeFixedMinor: number = DEFAULT_FEE_TERMS.fixedHundredths;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: CreateMerchantRequest & { platformFeeFixedMinor?: number | null }): Merchant {
    const m = new Merchant();
    m.name = input.name;
    m.contactEmail = input.contactEmail;
    m.description = input.description ?? null;
    m.contactPhone = input.contactPhone ?? null;
    m.country = input.country ?? null;
    m.timeZone = input.timeZone ?? null;
    if (input.billingRetryOffsetsDays) m.billingRetryOffsetsDays = canonicalRetryOffsets(input.billingRetryOffsetsDays);
    if (input.billingTerminalAction) m.billingTerminalAction = input.billingTerminalAction;
    if (input.bankSettlementWindowDays != null) m.bankSettlementWindowDays = input.bankSettlementWindowDays;
    m.updateBillingTerms({ platformFeePercent: input.platformFeePercent, platformFeeFixedMinor: input.platformFeeFixedMinor }, m.createdAt);
    return m;
  }

  /** Platform admin: name and contact details; absent (undefined or null) fields are unchanged. */
  updateProfile(change: { name?: string | null; contactEmail?: string | null; description?: string | null; contactPhone?: string | null; country?: string | null; timeZone?: string | null }, now = new Date()): void {
    if (change.name != null) this.name = change.name;
    if (change.contactEmail != null) this.contactEmail = change.contactEmail;
    if (change.description != null) this.description = change.description;
    if (change.contactPhone != null) this.contactPhone = change.contactPhone;
    if (change.country != null) this.country = change.country;
    if (change.timeZone != null) this.timeZone = change.timeZone;
    this.updatedAt = now;
  }

  /** Platform admin: fee, retry and settlement terms; absent (undefined or null) fields are unchanged. */
  updateBillingTerms(
    change: { platformFeePercent?: string | number | null; platformFeeFixedMinor?: number | null; billingRetryOffsetsDays?: string | null; billingTerminalAction?: TerminalAction | null; bankSettlementWindowDays?: number | null },
    now = new Date(),
  ): void {
    if (change.platformFeePercent != null) this.platformFeePercent = normalisePercent(change.platformFeePercent);
    if (change.platformFeeFixedMinor != null) this.platformFeeFixedMinor = change.platformFeeFixedMinor;
    if (change.billingRetryOffsetsDays) this.billingRetryOffsetsDays = canonicalRetryOffsets(change.billingRetryOffsetsDays);
    if (change.billingTerminalAction) this.billingTerminalAction = change.billingTerminalAction;
    if (change.bankSettlementWindowDays != null) this.bankSettlementWindowDays = change.bankSettlementWindowDays;
    this.updatedAt = now;
  }

  feeTerms(): FeeTerms {
    return { percent: normalisePercent(this.platformFeePercent), fixedHundredths: Number(this.platformFeeFixedMinor) };
  }

  /** Absent (undefined or null) fields keep their stored value; credentials stay write-only. */
  configureProvider(change: { providerEnvironment?: ProviderEnvironment | null } & { [K in keyof ProviderCredentials]?: string | null }, box: SecretBox): void {
    const current: ProviderCredentials = this.providerCredentialsSealed ? JSON.parse(box.open(this.providerCredentialsSealed)) : {};
    const next: ProviderCredentials = {
      gatewayUsername: change.gatewayUsername ?? current.gatewayUsername,
      gatewayPassword: change.gatewayPassword ?? current.gatewayPassword,
      merchantGuid: change.merchantGuid ?? current.merchantGuid,
    };
    if (change.providerEnvironment) this.providerEnvironment = change.providerEnvironment;
    this.providerCredentialsSealed = box.seal(JSON.stringify(next));
    this.gatewayConfigured = Boolean(next.gatewayUsername && next.gatewayPassword);
    this.merchantGuidConfigured = Boolean(next.merchantGuid);
    // The provider-side profile id is derived from the merchant, not a secret; present once configured.
    this.providerMerchantProfileId = this.gatewayConfigured ? `prof_${this.id.replace(/-/g, '').slice(0, 20)}` : null;
    this.updatedAt = new Date();
  }

  /** Unseals the gateway credentials for a provider call; never serialised into a response. */
  credentials(box: SecretBox): ProviderCredentials {
    return this.providerCredentialsSealed ? JSON.parse(box.open(this.providerCredentialsSealed)) : {};
  }

  /** The stored merchant (text never given is null here; the REST view makes it the empty string). */
  toView(): Omit<MerchantView, ProfileTextField | 'platformFeePercent' | 'platformFeeFixed'> & { [F in ProfileTextField]: string | null } & { platformFeePercent: string; platformFeeFixedMinor: number } {
    return {
      id: this.id,
      name: this.name,
      description: this.description,
      contactEmail: this.contactEmail,
      contactPhone: this.contactPhone,
      country: this.country,
      timeZone: this.timeZone,
      isActive: this.isActive,
      gatewayConfigured: this.gatewayConfigured,
      createdAt: this.createdAt.toISOString(),
      updatedAt: this.updatedAt.toISOString(),
      providerEnvironment: this.providerEnvironment,
      merchantGuidConfigured: this.merchantGuidConfigured,
      providerMerchantProfileId: this.providerMerchantProfileId,
      billingRetryOffsetsDays: this.billingRetryOffsetsDays,
      billingTerminalAction: this.billingTerminalAction,
      bankSettlementWindowDays: this.bankSettlementWindowDays,
      platformFeePercent: normalisePercent(this.platformFeePercent),
      platformFeeFixedMinor: Number(this.platformFeeFixedMinor),
    };
  }
}

type ProfileTextField = 'description' | 'contactPhone' | 'country' | 'timeZone' | 'providerMerchantProfileId';

export const MerchantSchema = new EntitySchema<Merchant>({
  class: Merchant,
  tableName: 'merchants',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'string' },
    description: { type: 'text', nullable: true },
    contactEmail: { type: 'string' },
    contactPhone: { type: 'string', nullable: true },
    country: { type: 'string', nullable: true },
    timeZone: { type: 'string', nullable: true },
    isActive: { type: 'boolean' },
    providerEnvironment: { type: 'string' },
    providerCredentialsSealed: { type: 'text', nullable: true },
    gatewayConfigured: { type: 'boolean' },
    merchantGuidConfigured: { type: 'boolean' },
    providerMerchantProfileId: { type: 'string', nullable: true },
    billingRetryOffsetsDays: { type: 'string' },
    billingTerminalAction: { type: 'string' },
    bankSettlementWindowDays: { type: 'integer' },
    platformFeePercent: { type: 'decimal', columnType: 'numeric(7,4)' },
    platformFeeFixedMinor: { type: new BigIntType('number') },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
