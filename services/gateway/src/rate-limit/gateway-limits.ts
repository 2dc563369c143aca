import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '@billing/contracts';
import { recordRateLimitRejection } from '@billing/telemetry';
import type { Logger } from '@billing/service-runtime';
import { credentialId, type Principal } from '../auth/principal.js';
import type { RouteSpec } from '../http/route.js';
import { KvBucketStore } from './kv-bucket-store.js';
import { RateLimiter, type RateDecision } from './rate-limiter.js';
import type { RatePolicy } from './token-bucket.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The limits this request was counted against, in the order checked (for the RateLimit headers). */
    rateLimits?: RateDecision[];
    /**
     * The account a password request is about (its `password-account` key), charged if the
     * password check fails, and whether the request is a sign-in (one that succeeds resets it).
     */
    passwordAccount?: { key: string; signIn: boolean };
  }
}

/**
 * Routes that make identity hash a password (about 128 MiB and a large share of a core each),
 * the body field naming the account they act on, and the kind of that account. They get their
 * own low limits, per client IP and per account, on top of every other limit.
 */
export const PASSWORD_ROUTES: Readonly<Record<string, { field: 'email' | 'token'; kind: AccountKind; signIn?: true }>> = {
  'POST /api/account/login': { field: 'email', kind: 'customer', signIn: true },
  'POST /api/account/signup': { field: 'email', kind: 'customer' },
  'POST /api/account/reset-password': { field: 'token', kind: 'customer' },
  'POST /api/auth/login': { field: 'email', kind: 'merchant-user', signIn: true },
};

type AccountKind = 'customer' | 'merchant-user';

export interface GatewayLimitsConfig {
  NATS_URL: string;
  RATE_LIMIT_KV_BUCKET: string;
  RATE_LIMIT_SYNC_MS: number;
  RATE_LIMIT_PER_SECOND: number;
  RATE_LIMIT_BURST: number;
  RATE_LIMIT_IP_PER_SECOND: number;
  RATE_LIMIT_IP_BURST: number;
  AUTH_FAILURE_LIMIT_PER_MINUTE: number;
  PASSWORD_LIMIT_IP_PER_MINUTE: number;
  PASSWORD_LIMIT_ACCOUNT_PER_MINUTE: number;
}

type LimitName = 'ip' | 'credential' | 'auth-failures' | 'password-ip' | 'password-account';

/** A per-minute allowance as a token bucket: the whole allowance at once, refilled over a minute. */
const perMinute = (n: number): RatePolicy => ({ ratePerSecond: n / 60, burst: n });

/**
 * Every limit of the gateway, all token buckets shared across replicas through one NATS KV
 * bucket (see RateLimiter), each off when its env var is 0:
 * - `ip`: every API request per client IP, checked before anything else costs (authentication
 *   included), generous enough for several credentials behind one address;
 * - `auth-failures`: failed authentications per client IP; once spent, requests with a bearer
 *   credential from that IP are 429 before the credential is looked at (random `sk_…` values or
 *   forged JWTs stop costing identity lookups and signature checks);
 * - `password-ip` and `password-account`: the routes in PASSWORD_ROUTES, per client IP counting
 *   every attempt, and per account (email by kind, or the reset token) counting failed password
 *   checks (401) and refusing while they are spent; a successful sign-in resets the account's;
 * - `credential`: per credential after authentication (per client IP on anonymous routes), the
 *   contract's 100/s with a burst of 200.
 * Every limited response carries RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers)
 * for the limits it was counted against; a 429 also carries Retry-After.
 */
export class GatewayLimits {
  private readonly limiters: Partial<Record<LimitName, RateLimiter>> = {};
  private readonly store?: KvBucketStore;

  constructor(config: GatewayLimitsConfig, logger: Logger) {
    const policies: Record<LimitName, RatePolicy | undefined> = {
      ip: config.RATE_LIMIT_IP_PER_SECOND > 0 ? { ratePerSecond: config.RATE_LIMIT_IP_PER_SECOND, burst: config.RATE_LIMIT_IP_BURST } : undefined,
      'auth-failures': config.AUTH_FAILURE_LIMIT_PER_MINUTE > 0 ? perMinute(config.AUTH_FAILURE_LIMIT_PER_MINUTE) : undefined,
      'password-ip': config.PASSWORD_LIMIT_IP_PER_MINUTE > 0 ? perMinute(config.PASSWORD_LIMIT_IP_PER_MINUTE) : undefined,
      'password-account': config.PASSWORD_LIMIT_ACCOUNT_PER_MINUTE > 0 ? perMinute(config.PASSWORD_LIMIT_ACCOUNT_PER_MINUTE) : undefined,
      credential: config.RATE_LIMIT_PER_SECOND > 0 ? { ratePerSecond: config.RATE_LIMIT_PER_SECOND, burst: config.RATE_LIMIT_BURST } : undefined,
    };
    const active = Object.entries(policies).filter((e): e is [LimitName, RatePolicy] => e[1] !== undefined);
    if (active.length === 0) return;
    // Stored buckets expire once the slowest would have refilled from the deepest debt to full.
    const ttlMs = Math.max(60_000, ...active.map(([, p]) => Math.ceil((2 * p.burst * 1000) / p.ratePerSecond)));
    this.store = new KvBucketStore({ natsUrl: config.NATS_URL, bucket: config.RATE_LIMIT_KV_BUCKET, ttlMs, logger });
    const followed: LimitName[] = ['auth-failures', 'password-ip', 'password-account'];
    for (const [name, policy] of active) {
      this.limiters[name] = new RateLimiter({ name, policy, syncMs: config.RATE_LIMIT_SYNC_MS, store: this.store, logger, followShared: followed.includes(name) });
    }
  }

  start(): void {
    for (const l of Object.values(this.limiters)) l.start();
  }

  async stop(): Promise<void> {
    for (const l of Object.values(this.limiters)) l.stop();
    await this.store?.close();
  }

  /** Every request to a route, per client IP, as it arrives: before its body is read, so a body refused unparsed is counted too. */
  admitClient(request: FastifyRequest, reply: FastifyReply): void {
    this.enforce(request, reply, this.limiters.ip?.check(request.ip));
  }

  /** The password routes' limits, per client IP and per account (read from the body). */
  admit(spec: RouteSpec, request: FastifyRequest, reply: FastifyReply): void {
    const route = PASSWORD_ROUTES[`${spec.method} ${spec.url}`];
    if (!route) return;
    this.enforce(request, reply, this.limiters['password-ip']?.check(request.ip));
    const account = accountOf(request.body, route.field, route.kind);
    if (!account) return;
    // Per account, only failed password checks count (`requestFailed`): a client the account's
    // lockout has stopped costs nothing and spends nothing, and signing in does not spend the
    // limit, so keeping the owner out takes a stream of fresh clients, each locked after five.
    request.passwordAccount = { key: account, signIn: route.signIn === true };
    this.enforce(request, reply, this.limiters['password-account']?.peek(account));
  }

  /** A request failed after admission: on a password route, a 401 (wrong password or email) is one failure of its account. */
  requestFailed(request: FastifyRequest, error: DomainError): void {
    if (request.passwordAccount && error.code === 'unauthenticated') this.limiters['password-account']?.charge(request.passwordAccount.key);
  }

  /**
   * A request succeeded: a successful sign-in resets its account's count of failed password
   * checks, as it resets the login lockout's count ("a successful login resets the count"), so
   * an owner who mistypes now and then is never refused with the right password.
   */
  requestSucceeded(request: FastifyRequest): void {
    if (request.passwordAccount?.signIn) this.limiters['password-account']?.restore(request.passwordAccount.key);
  }

  /** Before a bearer credential is verified: 429 when the client IP has spent its failed authentications. */
  beforeAuthentication(request: FastifyRequest, reply: FastifyReply): void {
    this.enforce(request, reply, this.limiters['auth-failures']?.peek(request.ip));
  }

  authenticationFailed(request: FastifyRequest): void {
    this.limiters['auth-failures']?.charge(request.ip);
  }

  /** After authentication: per credential, or per client IP on anonymous routes. */
  limitCredential(request: FastifyRequest, principal: Principal | undefined, reply: FastifyReply): void {
    this.enforce(request, reply, this.limiters.credential?.check(principal ? credentialId(principal) : `ip:${request.ip}`));
  }

  private enforce(request: FastifyRequest, reply: FastifyReply, decision: RateDecision | undefined): void {
    if (!decision) return;
    const decisions = (request.rateLimits ??= []);
    decisions.push(decision);
    reply.header('ratelimit-policy', decisions.map((d) => policyItem(d.limiter.name, d.limiter.policy)).join(', '));
    reply.header('ratelimit', decisions.map((d) => `"${d.limiter.name}";r=${d.remaining};t=${d.resetSeconds}`).join(', '));
    // The earlier drafts' fields too, for clients that read them: the limit closest to running
    // out, as a share of its quota (by count, an untouched small bucket, such as the 30 failed
    // authentications, would hide a large one that is nearly spent).
    const share = (d: RateDecision) => d.remaining / d.limiter.policy.burst;
    const tightest = decisions.reduce((x, y) => (share(y) < share(x) ? y : x));
    reply.header('ratelimit-limit', String(tightest.limiter.policy.burst));
    reply.header('ratelimit-remaining', String(tightest.remaining));
    if (!decision.allowed) {
      const seconds = decision.retryAfterSeconds;
      recordRateLimitRejection(decision.limiter.name);
      throw new DomainError('rate_limited', `Rate limit "${decision.limiter.name}" exceeded; retry in ${seconds} second(s).`, { retryAfterSeconds: seconds });
    }
  }
}

/** A quota policy item: quota `q` (the bucket size) over window `w` (seconds to refill it from empty). */
function policyItem(name: string, policy: RatePolicy): string {
  return `"${name}";q=${policy.burst};w=${Math.max(1, Math.ceil(policy.burst / policy.ratePerSecond))}`;
}

/**
 * The account a password request acts on: its kind and lower-cased email, or a digest of the
 * reset token. Customer accounts and merchant users are separate, so attempts on a customer email
 * (login, signup, reset) never spend the limit of the merchant user with that email, nor the
 * other way round.
 */
function accountOf(body: unknown, field: string, kind: AccountKind): string | undefined {
  const value = (body as Record<string, unknown> | undefined)?.[field];
  if (typeof value !== 'string' || value === '') return undefined;
  return field === 'token' ? `token:${createHash('sha256').update(value).digest('hex')}` : `${kind}:${field}:${value.toLowerCase()}`;
}
