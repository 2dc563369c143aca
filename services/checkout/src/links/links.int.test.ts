import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { openDatabase } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import type { CheckoutBackends } from '../backends.js';
import { MIGRATIONS } from '../migrations/index.js';
import { Link } from './link.js';
import { Links } from './links.js';

// Creating links against a real Postgres database of its own, with identity's signing keys and
// billing's plans faked: which refusal wins when both lookups fail, and the row written.

const { orm } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'checkout', entities: ENTITIES }),
  schema: 'checkout',
  migrations: MIGRATIONS,
});

type KeyAnswer = 'ok' | 'revoked' | 'not_found' | 'other_merchant' | 'broken';
type PlanAnswer = 'ok' | 'inactive' | 'not_found' | 'broken';

const merchantId = randomUUID();
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const BROKEN_KEY = new Error('identity is down');
const BROKEN_PLAN = new Error('billing is down');

/** Links whose key and plan lookups answer as given, each after a short delay. */
function linksWith(key: KeyAnswer, plan: PlanAnswer): Links {
  const later = <T>(answer: () => T) => new Promise<T>((resolve, reject) => setTimeout(() => {
    try {
      resolve(answer());
    } catch (e) {
      reject(e);
    }
  }, 5));
  const backends = {
    signing: {
      GetSigningSecret: () => later(() => {
        if (key === 'not_found') throw new DomainError('not_found', 'API key not found.');
        if (key === 'broken') throw BROKEN_KEY;
        return { merchantId: key === 'other_merchant' ? randomUUID() : merchantId.toUpperCase(), signingSecret: SECRET, revoked: key === 'revoked', expiresAt: '' };
      }),
    },
    plans: {
      GetPlan: () => later(() => {
        if (plan === 'not_found') throw new DomainError('not_found', 'Plan not found.');
        if (plan === 'broken') throw BROKEN_PLAN;
        return { isActive: plan === 'ok' };
      }),
    },
  } as unknown as CheckoutBackends;
  return new Links(orm(), backends, { publicBaseUrl: 'https://pay.example.com/', production: false });
}

const request = () => ({ merchantId, apiKeyId: randomUUID(), planId: randomUUID(), returnUrl: 'https://merchant.example.com/done' });

/** What `create` answered: ok, a DomainError's code (with the field for a validation error), or the other error. */
async function outcomeOf(key: KeyAnswer, plan: PlanAnswer): Promise<unknown> {
  try {
    await linksWith(key, plan).create(request());
    return 'ok';
  } catch (e) {
    if (!(e instanceof DomainError)) return e;
    return e.code === 'validation_failed' ? `field ${Object.keys(e.extensions.errors as object).join()}` : e.code;
  }
}

describe('Links.create', () => {
  it('answers as if the key were checked before the plan, though both are looked up at once', async () => {
    const cases: [KeyAnswer, PlanAnswer, unknown][] = [
      ['ok', 'ok', 'ok'],
      ['ok', 'not_found', 'not_found'],
      ['ok', 'inactive', 'unprocessable'],
      ['ok', 'broken', BROKEN_PLAN],
      ['not_found', 'ok', 'field apiKeyId'],
      ['revoked', 'not_found', 'field apiKeyId'],
      ['other_merchant', 'inactive', 'field apiKeyId'],
      ['not_found', 'broken', 'field apiKeyId'],
      ['broken', 'ok', BROKEN_KEY],
      ['broken', 'not_found', BROKEN_KEY],
      ['broken', 'broken', BROKEN_KEY],
    ];
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      for (const [key, plan, expected] of cases) expect([key, plan, await outcomeOf(key, plan)]).toEqual([key, plan, expected]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it('writes the row the ORM would write for the link', async () => {
    const req = { ...request(), returnUrl: "https://merchant.example.com/done?o='1'&n=\"2\"&u=é" };
    const created = await Promise.all([linksWith('ok', 'ok').create(req), linksWith('ok', 'ok').create({ ...req, apiKeyId: randomUUID() })]);
    expect(created[0]!.url).toBe(`https://pay.example.com/checkout?d=${created[0]!.d}&s=${created[0]!.s}`);
    const [written] = await orm().em.fork().find(Link, { apiKeyId: req.apiKeyId });
    expect(written).toBeDefined();

    const twin = Object.assign(new Link(), { ...written!, id: randomUUID() });
    await orm().em.fork().insertMany([twin]);
    const rows = await orm().em.getConnection().execute<Record<string, unknown>[]>(
      `select to_jsonb(l) - 'id' as row from checkout.links l where id in (?, ?) order by id = ? desc`,
      [written!.id, twin.id, written!.id],
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]!.row).toEqual(rows[1]!.row);
    expect(rows[0]!.row).toMatchObject({ merchant_id: merchantId, api_key_id: req.apiKeyId, plan_id: req.planId, return_url: req.returnUrl });
    expect(new Date(created[0]!.expiresAt).getTime()).toBe(Math.floor(written!.expiresAt.getTime() / 1000) * 1000);
  });
});
