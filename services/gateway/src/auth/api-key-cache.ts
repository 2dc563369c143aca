import { DomainError } from '@billing/contracts';
import { sha256Hex, type Logger } from '@billing/service-runtime';
import { untraced } from '@billing/telemetry';
import type { IdentityClients } from '../backends/clients.js';
import type { CredentialFeed } from './credential-feed.js';

interface CachedKey {
  found: boolean;
  id: string;
  merchantId: string;
  expiresAtMs: number | null;
  revoked: boolean;
  loadedAt: number;
}

const MAX_ENTRIES = 50_000;
/** Unknown keys are remembered briefly so a flood of bad keys does not reach the database. */
const NEGATIVE_TTL_MS = 5_000;

/**
 * Authenticates API keys from memory. A key is looked up in identity (by SHA-256, so the
 * plaintext never leaves the gateway) once per TTL; revocations arrive through the credential
 * feed. Usage is collected and written back in batches, never per request.
 */
export class ApiKeyCache {
  private readonly byHash = new Map<string, CachedKey>();
  private readonly inflight = new Map<string, Promise<CachedKey>>();
  private readonly usage = new Map<string, Date>();
  private flushTimer?: NodeJS.Timeout;

  constructor(
    private readonly identity: IdentityClients,
    private readonly feed: CredentialFeed,
    private readonly logger: Logger,
    private readonly ttlMs: number,
    private readonly flushMs: number,
  ) {}

  start(): void {
    // Not traced: a timer, not a request.
    this.flushTimer = setInterval(() => void untraced(() => this.flushUsage()), this.flushMs);
    this.flushTimer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.flushTimer);
    await this.flushUsage();
  }

  /** The key's id and merchant, or an `unauthenticated` error for unknown, revoked or expired keys. */
  async authenticate(key: string): Promise<{ apiKeyId: string; merchantId: string }> {
    const hash = sha256Hex(key);
    const now = Date.now();
    let entry = this.byHash.get(hash);
    const ttl = entry?.found ? this.ttlMs : NEGATIVE_TTL_MS;
    if (!entry || now - entry.loadedAt > ttl) entry = await this.load(hash);
    if (!entry.found || entry.revoked || this.feed.isKeyRevoked(entry.id)) throw new DomainError('unauthenticated', 'The API key is invalid or revoked.');
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) throw new DomainError('unauthenticated', 'The API key has expired.');
    this.usage.set(entry.id, new Date(now));
    return { apiKeyId: entry.id, merchantId: entry.merchantId };
  }

  private load(hash: string): Promise<CachedKey> {
    let p = this.inflight.get(hash);
    if (!p) {
      p = this.identity.apiKeys
        .AuthenticateApiKey({ keyHash: hash })
        .then((r): CachedKey => {
          const entry: CachedKey = {
            found: r.found,
            id: r.id,
            merchantId: r.merchantId,
            expiresAtMs: r.expiresAt ? Date.parse(r.expiresAt) : null,
            revoked: Boolean(r.revokedAt),
            loadedAt: Date.now(),
          };
          if (this.byHash.size >= MAX_ENTRIES) this.byHash.delete(this.byHash.keys().next().value!);
          this.byHash.set(hash, entry);
          return entry;
        })
        .finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, p);
    }
    return p;
  }

  private async flushUsage(): Promise<void> {
    if (this.usage.size === 0) return;
    const usages = [...this.usage].map(([id, at]) => ({ id, usedAt: at.toISOString() }));
    this.usage.clear();
    try {
      await this.identity.apiKeys.RecordApiKeyUsage({ usages });
    } catch (e) {
      this.logger.warn({ err: e, count: usages.length }, 'could not record API key usage; will retry');
      for (const u of usages) if (!this.usage.has(u.id)) this.usage.set(u.id, new Date(u.usedAt));
    }
  }
}
