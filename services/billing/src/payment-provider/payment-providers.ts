import { DomainError } from '@billing/contracts';
import type { PaymentProvider } from './payment-provider.js';

/**
 * Chooses the provider for a merchant's environment: `Staging` uses the sandbox; `Production`
 * uses the real provider when one is configured. An environment without one is refused before
 * anything is sent: callers that record a call check `configuredFor` first, so that refusal is
 * never mistaken for a call whose outcome is unknown.
 */
export class PaymentProviders {
  constructor(
    private readonly staging: PaymentProvider,
    private readonly production: PaymentProvider | null = null,
  ) {}

  /** Whether calls of a merchant in `environment` can be made at all. */
  configuredFor(environment: string): boolean {
    return environment !== 'Production' || this.production !== null;
  }

  /** The provider of `environment`; provider_unavailable (nothing was sent) when it has none. */
  forEnvironment(environment: string): PaymentProvider {
    if (environment === 'Production') {
      if (!this.production) throw new DomainError('provider_unavailable', 'No production payment provider is configured.');
      return this.production;
    }
    return this.staging;
  }
}
