import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_MINOR_UNITS } from '@billing/money';
import { sortsAndFilters } from '../../../../tests/support/list-plan.js';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { insertTransactions } from '../billing-runs/billing-run-store.js';
import { BillingConfig } from '../config.js';
import { MIGRATIONS } from '../migrations/index.js';
import { SUBSCRIPTION_LIST_ORDER } from '../subscriptions/subscriptions-grpc.js';
import { Subscription } from '../subscriptions/subscription.js';
import { Transaction } from './transaction.js';
import { TRANSACTION_LIST_ORDER } from './transactions-grpc.js';
import { loadTransactions } from './transaction-row.js';

// The hand-mapped transaction rows (read on the refund and retry path, written by billing runs)
// against the ORM: a column added to the entity and missed in the mapping fails here.

const { orm, rows } = useMigratedDatabase({
  open: (url) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url })),
  schema: 'billing',
  migrations: MIGRATIONS,
});


/** A merchant, member, payment method and subscription for transactions to reference. */
async function seedOwners() {
  const [merchantId, productId, planId, memberId, paymentMethodId, subscriptionId] = Array.from({ length: 6 }, () => randomUUID());
  await rows(`insert into billing.merchants (id, name, contact_email, created_at, updated_at) values (?, 'M', 'm@example.com', now(), now())`, [merchantId]);
  await rows(`insert into billing.products (id, merchant_id, name, created_at, updated_at) values (?, ?, 'P', now(), now())`, [productId, merchantId]);
  await rows(`insert into billing.plans (id, merchant_id, product_id, name, amount_minor, currency, billing_interval, created_at, updated_at) values (?, ?, ?, 'Monthly', 1995, 'AUD', 'Month', now(), now())`, [planId, merchantId, productId]);
  await rows(`insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at) values (?, ?, 'a@example.com', 'A', 'B', now(), now())`, [memberId, merchantId]);
  await rows(
    `insert into billing.payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, rank, created_at, updated_at) values (?, ?, ?, 'Card', 'Visa', '4242', 12, 2099, 1, now(), now())`,
    [paymentMethodId, merchantId, memberId],
  );
  await rows(
    `insert into billing.subscriptions (id, merchant_id, member_id, plan_id, payment_method_id, status, current_period_start, current_period_end, next_billing_at, billing_anchor, created_at, updated_at)
     values (?, ?, ?, ?, ?, 'Active', '2030-01-01T00:00:00Z', '2030-02-01T00:00:00Z', '2030-02-01T00:00:00Z', '2030-01-01T00:00:00Z', now(), now())`,
    [subscriptionId, merchantId, memberId, planId, paymentMethodId],
  );
  return { merchantId, memberId, paymentMethodId, subscriptionId };
}

/** A charge and a refund of it with every nullable column set (distinct instants, amounts past 2^32), and a charge and a refund with all of them null. */
async function seedTransactions(): Promise<string[]> {
  const { merchantId, memberId, paymentMethodId, subscriptionId } = await seedOwners();
  const [full, bare, fullRefund, bareRefund] = Array.from({ length: 4 }, () => randomUUID());
  await rows(
    `insert into billing.transactions (id, merchant_id, member_id, subscription_id, payment_method_id, kind, amount_minor, currency, status, failure_reason, attempt,
                                       original_transaction_id, period_start, fee_minor, refunded_minor, reason, provider_ref, claimed_until, occurred_at, settled_at, created_at, updated_at)
     values (?, ?, ?, ?, ?, 'Charge', ?, 'AUD', 'Settled', 'declined', 3, null, '2030-01-01T00:00:00.123Z', 4294967301, 4294967300, 'a "reason" \\ é', 'ch_1',
             '2030-01-02T00:00:00.001Z', '2030-01-03T00:00:00.002Z', '2030-01-04T00:00:00.003Z', '2030-01-05T00:00:00.004Z', now()),
            (?, ?, ?, null, null, 'Charge', 1, 'NZD', 'Processing', null, 1, null, null, 0, 0, null, null, null, '2030-01-03T00:00:00Z', null, now(), now())`,
    [full, merchantId, memberId, subscriptionId, paymentMethodId, MAX_MINOR_UNITS, bare, merchantId, memberId],
  );
  await rows(
    `insert into billing.transactions (id, merchant_id, member_id, subscription_id, payment_method_id, kind, amount_minor, currency, status, failure_reason, attempt,
                                       original_transaction_id, period_start, fee_minor, refunded_minor, reason, provider_ref, claimed_until, occurred_at, settled_at, created_at, updated_at)
     values (?, ?, ?, ?, ?, 'Refund', 4294967300, 'AUD', 'Failed', 'provider_rejected', 1, ?, '2030-01-01T00:00:00Z', 0, 0, 'requested', 'none:x',
             '2030-01-06T00:00:00.005Z', '2030-01-07T00:00:00.006Z', '2030-01-08T00:00:00.007Z', '2030-01-09T00:00:00.008Z', '2030-01-10T00:00:00.009Z'),
            (?, ?, ?, null, null, 'Refund', 1, 'NZD', 'Processing', null, 1, ?, null, 0, 0, null, null, null, now(), null, now(), now())`,
    [fullRefund, merchantId, memberId, subscriptionId, paymentMethodId, full, bareRefund, merchantId, memberId, bare],
  );
  return [full, bare, fullRefund, bareRefund];
}

/** Every property the ORM maps, as the ORM loads them. */
async function viaOrm(ids: string[]): Promise<Map<string, Transaction>> {
  return new Map((await orm().em.fork().find(Transaction, { id: { $in: ids } })).map((t) => [t.id, t]));
}

describe('hand-mapped transaction rows', () => {
  it('reads a charge and a refund, with every nullable column set and unset, exactly as the ORM hydrates them', async () => {
    const ids = await seedTransactions();
    const loaded = await loadTransactions(orm(), ids);
    const byOrm = await viaOrm(ids);
    expect(loaded.map((t) => t.id)).toEqual([...ids].sort());
    const props = Object.keys(orm().getMetadata().get(Transaction.name).properties);
    for (const t of loaded) {
      const o = byOrm.get(t.id)!;
      expect(t).toBeInstanceOf(Transaction);
      expect({ ...t }).toEqual({ ...o });
      for (const p of props) {
        // Same type too (a Date, not text; a number, not a bigint's text), null where the ORM has null.
        const [mine, its] = [t[p as keyof Transaction], o[p as keyof Transaction]];
        expect(mine, p).not.toBeUndefined();
        expect(mine === null ? 'null' : (mine as object).constructor.name, p).toBe(its === null ? 'null' : (its as object).constructor.name);
      }
    }
    const full = loaded.find((t) => t.id === ids[0])!;
    expect([full.amountMinor, full.feeMinor, full.refundedMinor, full.periodStart?.toISOString()]).toEqual([MAX_MINOR_UNITS, 4294967301, 4294967300, '2030-01-01T00:00:00.123Z']);
    expect(loaded.find((t) => t.id === ids[3])!.originalTransactionId).toBe(ids[1]);
  });

  it('writes (insertTransactions) what reads back as the same entity through the ORM and by hand', async () => {
    const { merchantId, memberId, paymentMethodId, subscriptionId } = await seedOwners();
    const charge = Object.assign(new Transaction(), {
      merchantId, memberId, subscriptionId, paymentMethodId, kind: 'Charge' as const, amountMinor: MAX_MINOR_UNITS, currency: 'AUD', attempt: 2,
      periodStart: new Date('2030-01-01T00:00:00.123Z'), feeMinor: 77, claimedUntil: new Date('2030-01-02T00:00:00.456Z'),
    });
    const refund = Object.assign(new Transaction(), { merchantId, memberId, kind: 'Refund' as const, amountMinor: 5, currency: 'AUD', originalTransactionId: charge.id, reason: 'duplicate' });
    await orm().em.fork().transactional((em) => insertTransactions(em, [charge, refund]));
    const byOrm = await viaOrm([charge.id, refund.id]);
    const loaded = new Map((await loadTransactions(orm(), [charge.id, refund.id])).map((t) => [t.id, t]));
    for (const t of [charge, refund]) {
      expect({ ...byOrm.get(t.id) }).toEqual({ ...t });
      expect({ ...loaded.get(t.id) }).toEqual({ ...t });
    }
  });
});

describe('list reads', () => {
  /** `sortsAndFilters` of a page of `entity` rows (`where`, in `orderBy`), as `findAndCount` asks for it. */
  const pagePlan = (entity: typeof Transaction | typeof Subscription, where: Record<string, unknown>, orderBy: Record<string, 'asc'>) =>
    sortsAndFilters(orm(), orm().em.fork().createQueryBuilder(entity).select('*').where(where).orderBy(orderBy).limit(200).offset(79_800).getFormattedQuery());

  it('pages transactions and subscriptions in order through an index of their filter, without sorting or filtering rows out', async () => {
    const { merchantId, memberId, subscriptionId } = await seedOwners();
    const [{ plan_id: planId }] = await rows<{ plan_id: string }>(`select plan_id from billing.subscriptions where id = ?`, [subscriptionId]);
    const transactionFilters = [{ merchantId }, { merchantId, status: 'Failed' }];
    for (const where of transactionFilters) expect(await pagePlan(Transaction, where, TRANSACTION_LIST_ORDER), JSON.stringify(where)).toEqual([]);
    const subscriptionFilters = [{ merchantId }, { merchantId, status: 'Paused' }, { merchantId, planId }, { merchantId, memberId }];
    for (const where of subscriptionFilters) {
      // A plan's or member's subscriptions are that merchant's: reading them by plan or member and checking the merchant filters nothing out.
      const expected = where.planId || where.memberId ? [expect.stringMatching(/^Index Scan \(\(?merchant_id = /)] : [];
      expect(await pagePlan(Subscription, where, SUBSCRIPTION_LIST_ORDER), JSON.stringify(where)).toEqual(expected);
    }
  });
});
