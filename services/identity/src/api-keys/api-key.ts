import { randomBytes, randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError, type ApiKeyEndpointState } from '@billing/contracts';
import { sha256Hex, type SecretBox } from '@billing/service-runtime';

export const KEY_PREFIX_LENGTH = 11;
export const SIGNING_SECRET_PREFIX_LENGTH = 12;

/**
 * An integration's credential. The key is kept only as its SHA-256; the webhook signing secret
 * is sealed (the webhooks service must sign with it, so it cannot be hashed).
 */
export class ApiKey {
  id: string = randomUUID();
  merchantId!: string;
  name!: string;
  keyHash!: string;
  keyPrefix!: string;
  signingSecretSealed!: string;
  signingSecretPrefix!: string;
  webhookUrl: string | null = null;
  /** null: every event type; []: none. */
  webhookEvents: string[] | null = null;
  webhookEnabled = false;
  expiresAt: Date | null = null;
  lastUsedAt: Date | null = null;
  revokedAt: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  /** Increases with every change of the webhook endpoint state (settings or revocation). */
  version = 1;

  /** Mints a key; the plaintexts are returned once and never stored. */
  static mint(props: { merchantId: string; name: string; expiresAt: Date | null }, box: SecretBox) {
    // One draw for both secrets (independent halves): a synchronous draw's fixed cost, not its size, dominates.
    const entropy = randomBytes(64);
    const key = `sk_${entropy.subarray(0, 32).toString('base64url')}`;
    const signingSecret = `whsec_${entropy.subarray(32).toString('base64')}`;
    const apiKey = Object.assign(new ApiKey(), {
      ...props,
      keyHash: sha256Hex(key),
      keyPrefix: key.slice(0, KEY_PREFIX_LENGTH),
      signingSecretSealed: box.seal(signingSecret),
      signingSecretPrefix: signingSecret.slice(0, SIGNING_SECRET_PREFIX_LENGTH),
    });
    return { apiKey, key, signingSecret };
  }

  /** Idempotent: revoking a revoked key keeps the original revocation time. */
  revoke(now = new Date()): boolean {
    if (this.revokedAt) return false;
    this.revokedAt = now;
    this.updatedAt = now;
    this.version++;
    return true;
  }

  configureWebhook(change: { webhookUrl?: string | null; webhookEvents?: string[] | null; webhookEnabled?: boolean }): void {
    // 400, one of the statuses the endpoint answers (interface.md: 200, 400, 404): the key is there, the request cannot apply to it.
    if (this.revokedAt) throw DomainError.field('id', 'The API key is revoked: it gets no webhooks and its webhook cannot be configured.');
    const next = {
      webhookUrl: change.webhookUrl === undefined ? this.webhookUrl : change.webhookUrl,
      webhookEvents: change.webhookEvents === undefined ? this.webhookEvents : change.webhookEvents && [...new Set(change.webhookEvents)],
      webhookEnabled: change.webhookEnabled ?? this.webhookEnabled,
    };
    if (next.webhookEnabled && !next.webhookUrl) throw DomainError.field('webhookUrl', 'A webhook URL is required to enable webhooks.');
    Object.assign(this, next, { updatedAt: new Date(), version: this.version + 1 });
  }

  /** The endpoint state announced in `api_key.*` events (never the signing secret). */
  endpointState(): ApiKeyEndpointState {
    return {
      apiKeyId: this.id,
      merchantId: this.merchantId,
      webhookUrl: this.webhookUrl,
      webhookEvents: this.webhookEvents,
      webhookEnabled: this.webhookEnabled,
      revoked: this.revokedAt !== null,
      version: this.version,
    };
  }

  isUsable(now = new Date()): boolean {
    return !this.revokedAt && (!this.expiresAt || this.expiresAt > now);
  }
}

export const ApiKeySchema = new EntitySchema<ApiKey>({
  class: ApiKey,
  tableName: 'api_keys',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid', index: true },
    name: { type: 'string' },
    keyHash: { type: 'string', unique: true },
    keyPrefix: { type: 'string' },
    signingSecretSealed: { type: 'text' },
    signingSecretPrefix: { type: 'string' },
    webhookUrl: { type: 'text', nullable: true },
    webhookEvents: { type: 'json', nullable: true },
    webhookEnabled: { type: 'boolean' },
    expiresAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    lastUsedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    revokedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
    version: { type: 'integer' },
  },
});
