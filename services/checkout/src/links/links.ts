import { randomBytes } from 'node:crypto';
import { UniqueConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { CHECKOUT_SESSION_TTL_SECONDS, DomainError } from '@billing/contracts';
import { Batcher, PLATFORM_SCOPE, queryPrepared, scopeOfMerchant, settledValue, sha256Hex } from '@billing/service-runtime';
import type { Scope } from '@billing/proto-types/common/v1/Scope';
import type { CheckoutLink__Output as CheckoutLink } from '@billing/proto-types/checkout/v1/CheckoutLink';
import type { ResolveLinkReply__Output as ResolveLinkReply } from '@billing/proto-types/checkout/v1/ResolveLinkReply';
import type { CheckoutBackends } from '../backends.js';
import { CheckoutSession } from '../sessions/session.js';
import { decodeLink, encodeLink, signLink, verifyLink, type LinkPayload } from './link-codec.js';
import { Link } from './link.js';
import { returnUrlProblem } from './return-url.js';

export const DEFAULT_LINK_MINUTES = 60;
export const MAX_LINK_MINUTES = 10_080;

/** Outcomes of resolving a link, in the order they are checked (contract §6). */
export type ResolveOutcome = 'Ok' | 'InvalidSignature' | 'ApiKeyNotFound' | 'MerchantMismatch' | 'LinkExpired' | 'NonceAlreadyUsed' | 'PlanNotFound';

interface SigningKey {
  merchantId: string;
  secret: string;
}

export interface LinkOptions {
  publicBaseUrl: string;
  production: boolean;
}

/** A link as a row of `links` (instants in ISO 8601, which keeps their milliseconds). */
function linkRow(link: Link) {
  return {
    id: link.id,
    merchant_id: link.merchantId,
    api_key_id: link.apiKeyId,
    plan_id: link.planId,
    nonce: link.nonce,
    return_url: link.returnUrl,
    expires_at: link.expiresAt.toISOString(),
    created_at: link.createdAt.toISOString(),
  };
}

/** Signing links for merchants and resolving links into sessions. */
export class Links {
  /** Links created together are one multi-row INSERT, committed on its own (no BEGIN/COMMIT). */
  private readonly inserts: Batcher<Link, void>;

  constructor(
    private readonly orm: MikroORM,
    private readonly backends: CheckoutBackends,
    private readonly opts: LinkOptions,
  ) {
    this.inserts = new Batcher(async (links) => {
      // Hand-written: one prepared statement with the batch as one JSON parameter costs a
      // fraction of the CPU of the ORM's insertMany (metadata walk, query builder, SQL text).
      await queryPrepared(
        orm,
        'link_insert_batch',
        `insert into links (id, merchant_id, api_key_id, plan_id, nonce, return_url, expires_at, created_at)
         select id, merchant_id, api_key_id, plan_id, nonce, return_url, expires_at, created_at
           from jsonb_to_recordset($1::jsonb) as l(id uuid, merchant_id uuid, api_key_id uuid, plan_id uuid, nonce text, return_url text, expires_at timestamptz, created_at timestamptz)`,
        [JSON.stringify(links.map(linkRow))],
      );
      return links.map(() => undefined);
    });
  }

  /**
   * The key's merchant and signing secret, or undefined when it is unknown (to `scope`), revoked
   * or expired. Creating a link asks in the merchant's scope; resolving one asks in the platform
   * scope, since the anonymous link's claimed merchant is only checked against the key's after.
   */
  private async usableKey(scope: Scope, apiKeyId: string, now: Date): Promise<SigningKey | undefined> {
    try {
      const key = await this.backends.signing.GetSigningSecret({ scope, apiKeyId });
      if (key.revoked || (key.expiresAt && new Date(key.expiresAt) <= now)) return undefined;
      return { merchantId: key.merchantId.toLowerCase(), secret: key.signingSecret };
    } catch (e) {
      if (e instanceof DomainError && e.code === 'not_found') return undefined;
      throw e;
    }
  }

  /** Whether the plan is the merchant's and active. */
  private async planUsable(merchantId: string, planId: string): Promise<'ok' | 'missing' | 'inactive'> {
    try {
      const plan = await this.backends.plans.GetPlan({ scope: scopeOfMerchant(merchantId), id: planId });
      return plan.isActive ? 'ok' : 'inactive';
    } catch (e) {
      if (e instanceof DomainError && e.code === 'not_found') return 'missing';
      throw e;
    }
  }

  async create(req: { merchantId: string; apiKeyId: string; planId: string; returnUrl: string; customer?: LinkPayload['customer']; expiresInMinutes?: number }): Promise<CheckoutLink> {
    const now = new Date();
    const minutes = req.expiresInMinutes ?? DEFAULT_LINK_MINUTES;
    if (!Number.isInteger(minutes) || minutes < 1 || minutes > MAX_LINK_MINUTES) throw DomainError.field('expiresInMinutes', `Must be 1 to ${MAX_LINK_MINUTES}.`);
    const urlProblem = returnUrlProblem(req.returnUrl, this.opts.production);
    if (urlProblem) throw DomainError.field('returnUrl', urlProblem);
    // Both lookups at once, both settled before either answer is used (no unhandled rejection),
    // then judged in the order they would be asked one after the other: the key first.
    const [keyLookup, planLookup] = await Promise.allSettled([this.usableKey(scopeOfMerchant(req.merchantId), req.apiKeyId, now), this.planUsable(req.merchantId, req.planId)]);
    const key = settledValue(keyLookup);
    if (!key || key.merchantId !== req.merchantId) throw DomainError.field('apiKeyId', 'Must be an API key of this merchant that is neither revoked nor expired.');
    const plan = settledValue(planLookup);
    if (plan === 'missing') throw new DomainError('not_found', 'Plan not found.');
    if (plan === 'inactive') throw new DomainError('unprocessable', 'The plan is not active; customers cannot subscribe to it.');

    const expiresAt = new Date(now.getTime() + minutes * 60_000);
    const payload: LinkPayload = {
      v: 1,
      kid: req.apiKeyId.toLowerCase(),
      mid: req.merchantId,
      pid: req.planId.toLowerCase(),
      nonce: randomBytes(18).toString('base64url'),
      exp: Math.floor(expiresAt.getTime() / 1000),
      returnUrl: req.returnUrl,
      ...(req.customer ? { customer: req.customer } : {}),
    };
    const d = encodeLink(payload);
    const s = signLink(d, key.secret);
    const link = Object.assign(new Link(), { merchantId: req.merchantId, apiKeyId: payload.kid, planId: payload.pid, nonce: payload.nonce, returnUrl: req.returnUrl, expiresAt, createdAt: now });
    await this.inserts.submit(link);
    const url = `${this.opts.publicBaseUrl.replace(/\/+$/, '')}/checkout?d=${d}&s=${s}`;
    return { url, d, s, expiresAt: new Date(payload.exp * 1000).toISOString() };
  }

  /**
   * Checks a link in the order of contract §6 and opens (or, for a replay of the same link,
   * finds) its session. Each refusal is an outcome, never an error. A replay of a link that has
   * opened its session answers the same outcome (Ok, the same session, a fresh token) after the
   * link's `exp` too, for as long as a session token lives from when the session opened
   * (`CHECKOUT_SESSION_TTL_SECONDS`): a visitor whose link expires mid-checkout, and whose page
   * resolves it again on reload, keeps the session. Later, or for a link that opened none, LinkExpired.
   */
  async resolve(d: string, s: string): Promise<ResolveLinkReply> {
    const now = new Date();
    const payload = decodeLink(d);
    if (!payload || returnUrlProblem(payload.returnUrl, this.opts.production)) return { outcome: 'InvalidSignature' };
    const key = await this.usableKey(PLATFORM_SCOPE, payload.kid, now);
    if (!key) return { outcome: 'ApiKeyNotFound' };
    if (!verifyLink(d, s, key.secret)) return { outcome: 'InvalidSignature' };
    const merchantId = payload.mid.toLowerCase();
    if (merchantId !== key.merchantId) return { outcome: 'MerchantMismatch' };
    const linkExpired = payload.exp * 1000 <= now.getTime();

    const linkHash = sha256Hex(d);
    const em = this.orm.em.fork();
    let session = await em.findOne(CheckoutSession, { merchantId, nonce: payload.nonce });
    if (linkExpired && !(session && session.linkHash === linkHash && session.createdAt.getTime() + CHECKOUT_SESSION_TTL_SECONDS * 1000 > now.getTime())) {
      return { outcome: 'LinkExpired' };
    }
    if (!session) {
      if ((await this.planUsable(merchantId, payload.pid)) !== 'ok') return { outcome: 'PlanNotFound' };
      session = await this.open(payload, linkHash);
    }
    if (session.linkHash !== linkHash) return { outcome: 'NonceAlreadyUsed' };
    const issued = await this.backends.tokens.IssueCheckoutToken({ sessionId: session.id, scope: scopeOfMerchant(merchantId) });
    return { outcome: 'Ok', sessionId: session.id, sessionToken: issued.token, expiresAt: issued.expiresAt };
  }

  /** A new session for the link; when a concurrent resolve of the same nonce won, that one. */
  private async open(payload: LinkPayload, linkHash: string): Promise<CheckoutSession> {
    const c = payload.customer ?? {};
    const session = Object.assign(new CheckoutSession(), {
      merchantId: payload.mid.toLowerCase(),
      apiKeyId: payload.kid.toLowerCase(),
      planId: payload.pid.toLowerCase(),
      nonce: payload.nonce,
      linkHash,
      returnUrl: payload.returnUrl,
      email: c.email ?? null,
      firstName: c.firstName ?? null,
      lastName: c.lastName ?? null,
      phone: c.phone ?? null,
    });
    try {
      await this.orm.em.fork().persist(session).flush();
      return session;
    } catch (e) {
      if (!(e instanceof UniqueConstraintViolationException)) throw e;
      return this.orm.em.fork().findOneOrFail(CheckoutSession, { merchantId: session.merchantId, nonce: session.nonce });
    }
  }
}
