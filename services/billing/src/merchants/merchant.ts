import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DEFAULT_RETRY_OFFSETS_DAYS, type CreateMerchantRequest, type Merchant as MerchantView } from '@billing/contracts';
import type { SecretBox } from '@billing/service-runtime';

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
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: CreateMerchantRequest): Merchant {
    const m = new Merchant();
    m.name = input.name;
    m.contactEmail = input.contactEmail;
    m.description = input.description ?? null;
    m.contactPhone = input.contactPhone ?? null;
    m.country = input.country ?? null;
    m.timeZone = input.timeZone ?? null;
    if (input.billingRetryOffsetsDays) m.billingRetryOffsetsDays = input.billingRetryOffsetsDays;
    if (input.billingTerminalAction) m.billingTerminalAction = input.billingTerminalAction;
    if (input.bankSettlementWindowDays != null) m.bankSettlementWindowDays = input.bankSettlementWindowDays;
    return m;
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

  toView(): MerchantView {
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
    };
  }
}

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
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
