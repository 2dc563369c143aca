import { DomainError } from '@billing/contracts';
import type { PaymentProvider } from './payment-provider.js';

/**
 * Chooses the provider for a merchant's environment: `Staging` uses the sandbox; `Production`
 * uses the real provider when one is configured.
 */
export class PaymentProviders {
  constructor(
    private readonly staging: PaymentProvider,
    private readonly production: PaymentProvider | null = null,
  ) {}

  forEnvironment(environment: string): PaymentProvider {
    if (environment === 'Production') {
      if (!this.production) throw new DomainError('provider_unavailable', 'No production payment provider is configured.');
      return this.production;
    }
    return this.staging;
  }
}
