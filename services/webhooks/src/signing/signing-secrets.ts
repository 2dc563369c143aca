import { createClient, scopeOfMerchant, type ServiceClient } from '@billing/service-runtime';
import { signingKey } from './signature.js';

/**
 * Signing keys of API keys, fetched from identity over gRPC (so the plaintext secret is never on
 * the event bus) and kept in memory only. Secrets do not change during a key's life, so an entry
 * is dropped only when it is `ttlMs` old; concurrent requests for one key share one call.
 */
export class SigningSecrets {
  private readonly client: ServiceClient<'identity.v1.WebhookSigning'>;
  private readonly cache = new Map<string, { key: Buffer; at: number }>();
  private readonly inFlight = new Map<string, Promise<Buffer>>();

  constructor(
    identityAddress: string,
    private readonly ttlMs = 10 * 60_000,
  ) {
    this.client = createClient('identity.v1.WebhookSigning', identityAddress, 5000);
  }

  /**
   * The HMAC key of the API key's signing secret, read in the scope of the delivery's merchant
   * (a key of another merchant is not found); rejects when identity cannot answer.
   */
  async keyFor(apiKeyId: string, merchantId: string): Promise<Buffer> {
    const entry = `${merchantId}/${apiKeyId}`;
    const hit = this.cache.get(entry);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.key;
    let pending = this.inFlight.get(entry);
    if (!pending) {
      pending = this.client
        .GetSigningSecret({ scope: scopeOfMerchant(merchantId), apiKeyId })
        .then((res) => {
          const key = signingKey(res.signingSecret);
          this.cache.set(entry, { key, at: Date.now() });
          return key;
        })
        .finally(() => this.inFlight.delete(entry));
      this.inFlight.set(entry, pending);
    }
    return pending;
  }

  close(): void {
    this.client.close();
  }
}
