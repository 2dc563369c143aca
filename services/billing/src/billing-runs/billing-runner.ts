import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '@billing/service-runtime';
import { recordBillingRun, recordCharge } from '@billing/telemetry';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import type { SubscriptionStore } from '../subscriptions/subscription-store.js';
import { BillingRun, type BillingRunOptions, type BillingRunResult } from './billing-run.js';

/**
 * Starts billing runs: on demand (the admin endpoint, with any `asOf`) and on a timer (every
 * `intervalMs` at the current time; 0 turns the timer off). Runs of one process do not overlap
 * on the timer; runs of several replicas may, and are safe to (see `BillingRun`).
 */
export class BillingRunner {
  private timer: NodeJS.Timeout | null = null;
  private scheduled: Promise<unknown> | null = null;

  constructor(
    private readonly orm: MikroORM,
    private readonly providers: PaymentProviders,
    private readonly opts: BillingRunOptions,
    private readonly logger: Logger,
    private readonly subscriptions: SubscriptionStore,
  ) {}

  async run(asOf: Date = new Date()): Promise<BillingRunResult> {
    const started = performance.now();
    try {
      const billingRun = new BillingRun(this.orm, this.providers, this.opts, this.logger, asOf, this.subscriptions);
      const result = await billingRun.execute();
      recordBillingRun('succeeded', (performance.now() - started) / 1000);
      recordCharge('succeeded', result.succeeded);
      recordCharge('failed', result.failed);
      recordCharge('skipped', result.skipped);
      // A provider outage shows as charges without an answer, not as no charges at all.
      recordCharge('unanswered', billingRun.unansweredCharges());
      return result;
    } catch (e) {
      recordBillingRun('failed', (performance.now() - started) / 1000);
      throw e;
    }
  }

  start(intervalMs: number): void {
    if (intervalMs <= 0) return;
    this.timer = setInterval(() => {
      if (this.scheduled) return;
      this.scheduled = this.run()
        .then((r) => {
          if (r.charged || r.terminated || r.skipped) this.logger.info({ ...r }, 'scheduled billing run');
        })
        .catch((err) => this.logger.error({ err }, 'scheduled billing run failed'))
        .finally(() => (this.scheduled = null));
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.scheduled;
  }
}
