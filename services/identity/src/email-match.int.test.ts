import { randomUUID } from 'node:crypto';
import { UniqueConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, openDatabase } from '@billing/service-runtime';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { ENTITIES } from './app.js';
import { CustomerAccount } from './customers/customer-account.js';
import { byEmail } from './email-match.js';
import { MerchantUser } from './merchant-users/merchant-user.js';
import { MIGRATIONS } from './migrations/index.js';

// Emails kept as sent and matched in any letter case, on a database that held accounts and
// merchant users before the migration that stopped lower-casing them (they were all lower-case).

const EMAILS_AS_SENT = MIGRATIONS.findIndex((m) => m.name === 'Migration20261127000000_customer_email_as_sent');
const ROWS = 5000;

let db: TestDatabase;
let orm: MikroORM;
beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openDatabase({ url: db.url, schema: 'identity', entities: ENTITIES, poolMax: 4 });
  await migrate(orm, 'identity', MIGRATIONS.slice(0, EMAILS_AS_SENT));
  const em = orm.em.fork();
  await em.execute(`insert into customer_accounts (id, email, first_name, last_name, created_at, updated_at)
    select gen_random_uuid(), 'customer' || g || '@example.com', 'A', 'B', now(), now() from generate_series(1, ${ROWS}) g`);
  await em.execute(`insert into merchant_users (id, merchant_id, email, password_hash, full_name, role, created_at, updated_at)
    select gen_random_uuid(), gen_random_uuid(), 'user' || g || '@example.com', 'hash', 'U', 'Staff', now(), now() from generate_series(1, ${ROWS}) g`);
  expect(await migrate(orm, 'identity', MIGRATIONS)).toEqual(MIGRATIONS.slice(EMAILS_AS_SENT).map((m) => m.name));
  await em.execute('analyze customer_accounts');
  await em.execute('analyze merchant_users');
}, 60_000);
afterAll(async () => {
  await orm?.close();
  await db?.drop();
});

describe('emails stored as sent, matched in any letter case', () => {
  it('keeps the accounts stored before the migration, finds them in any case, and refuses a second one in another case', async () => {
    const found = await orm.em.fork().findOne(CustomerAccount, byEmail('Customer77@EXAMPLE.com'));
    expect(found?.email).toBe('customer77@example.com');
    const twin = CustomerAccount.unclaimed({ email: 'CUSTOMER77@example.com', firstName: 'A', lastName: 'B' });
    await expect(orm.em.fork().persistAndFlush(twin)).rejects.toBeInstanceOf(UniqueConstraintViolationException);

    const mixed = CustomerAccount.unclaimed({ email: 'New.Customer@Example.COM', firstName: 'A', lastName: 'B' });
    await orm.em.fork().persistAndFlush(mixed);
    expect((await orm.em.fork().findOne(CustomerAccount, byEmail('new.customer@example.com')))?.email).toBe('New.Customer@Example.COM');
  });

  it('keeps merchant users as sent, unique in any case', async () => {
    expect((await orm.em.fork().findOne(MerchantUser, byEmail('USER9@example.com')))?.email).toBe('user9@example.com');
    const user = MerchantUser.create({ merchantId: randomUUID(), email: 'Owner.New@Example.COM', passwordHash: 'hash', fullName: 'O', role: 'Owner' });
    await orm.em.fork().persistAndFlush(user);
    expect((await orm.em.fork().findOne(MerchantUser, byEmail('owner.new@example.com')))?.email).toBe('Owner.New@Example.COM');
    const twin = MerchantUser.create({ merchantId: randomUUID(), email: 'OWNER.NEW@example.com', passwordHash: 'hash', fullName: 'O', role: 'Owner' });
    await expect(orm.em.fork().persistAndFlush(twin)).rejects.toBeInstanceOf(UniqueConstraintViolationException);
  });

  it("leaves replicas of the previous release, during a rolling deploy, their insert's `on conflict (email)`", async () => {
    const rows = await orm.em.fork().execute(
      `insert into customer_accounts (id, email, first_name, last_name, created_at, updated_at)
       values (?, 'customer1@example.com', 'A', 'B', now(), now()) on conflict (email) do nothing returning id`,
      [randomUUID()],
    );
    expect(rows).toEqual([]);
  });

  it.each([
    ['customer accounts', CustomerAccount, 'customer_accounts_email_lower_unique'],
    ['merchant users', MerchantUser, 'merchant_users_email_unique'],
  ] as const)('looks %s up by email on the unique index on lower(email)', async (_what, entity, index) => {
    const sql = orm.em.fork().createQueryBuilder(entity).select('*').where(byEmail('Someone@Example.com')).getFormattedQuery();
    const plan = (await orm.em.fork().execute<{ 'QUERY PLAN': string }[]>(`explain ${sql}`)).map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain(`Index Scan using ${index}`);
  });
});
