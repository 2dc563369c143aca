import { merchantFilter, queryRows, requireMerchantScope, requireScope, type ServiceImpl } from '@billing/service-runtime';
import { LockMode, UniqueConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateMerchantUserRequest, DomainError, isUuidText, MERCHANT_TOKEN_TTL_SECONDS, MerchantLoginRequest, parseOrThrow, UpdateMerchantUserRequest } from '@billing/contracts';
import { CredentialChange } from '../credential-changes/credential-change.js';
import type { LoginLockout } from '../passwords/login-lockout.js';
import type { PasswordHasher } from '../passwords/password-hasher.js';
import type { TokenIssuer } from '../signing-keys/token-issuer.js';
import { byEmail } from '../email-match.js';
import { MerchantUser } from './merchant-user.js';

/**
 * The ids of a merchant's active Owners, locked in id order. An Owner's change (through the API)
 * locks them before the changed user's row, so that two Owners removing themselves at once
 * cannot both see the other still there (nor deadlock).
 */
async function lockActiveOwners(em: EntityManager, merchantId: string): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(em, `select id from merchant_users where merchant_id = ? and role = 'Owner' and is_active order by id for update`, [merchantId]);
  return rows.map((r) => r.id);
}

export function merchantUsersGrpc(orm: MikroORM, hasher: PasswordHasher, issuer: TokenIssuer, lockout: LoginLockout): ServiceImpl<'identity.v1.MerchantUsers'> {
  return {
    CreateMerchantUser: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(CreateMerchantUserRequest, req);
      const em = orm.em.fork();
      const user = MerchantUser.create({ merchantId, email: input.email, fullName: input.fullName, role: input.role, passwordHash: await hasher.hash(input.password) });
      try {
        await em.persistAndFlush(user);
      } catch (e) {
        if (e instanceof UniqueConstraintViolationException) throw new DomainError('conflict', 'A merchant user with this email already exists.');
        throw e;
      }
      return user.toView();
    },

    UpdateMerchantUser: async (req) => {
      const scope = requireScope(req.scope);
      const parsed = parseOrThrow(UpdateMerchantUserRequest, { isActive: req.isActive, role: req.role });
      // A null field (as some clients send an absent one) changes nothing, as an absent one.
      const change = { isActive: parsed.isActive ?? undefined, role: parsed.role ?? undefined };
      return orm.em.fork().transactional(async (em) => {
        const owners = req.actingUserId && scope.kind === 'merchant' ? await lockActiveOwners(em, scope.merchantId) : undefined;
        const user = await em.findOne(MerchantUser, { id: req.userId, ...merchantFilter(scope) }, { lockMode: 4 /* pessimistic write */ });
        if (!user) throw new DomainError('not_found', 'Merchant user not found.');
        // An Owner cannot leave the merchant with no active Owner: it could no longer manage its
        // users, and only the platform could restore one. The platform's own changes are not limited.
        if (owners && user.removesOwner(change) && owners.every((id) => id === user.id)) {
          throw new DomainError('conflict', "This is the merchant's only active Owner: make another user Owner first.");
        }
        const effect = user.update(change);
        if (!effect) return user.toView();
        const credentialChange = CredentialChange.of('merchant_user', user.id, effect === 'revoked');
        em.persist(credentialChange);
        return { ...user.toView(), tokensRevokedAt: credentialChange.revoked ? credentialChange.at.toISOString() : undefined };
      });
    },

    GetMerchantUser: async (req) => {
      const scope = requireScope(req.scope);
      const user = isUuidText(req.userId) ? await orm.em.fork().findOne(MerchantUser, { id: req.userId.toLowerCase(), ...merchantFilter(scope) }) : null;
      if (!user) throw new DomainError('not_found', 'Merchant user not found.');
      return user.toView();
    },

    ListMerchantUsers: async (req) => {
      const [items, total] = await orm.em.fork().findAndCount(
        MerchantUser,
        { merchantId: requireMerchantScope(req.scope) },
        { orderBy: { createdAt: 'asc', id: 'asc' }, limit: req.pageSize, offset: (req.page - 1) * req.pageSize },
      );
      return { items: items.map((u) => u.toView()), totalCount: total };
    },

    LoginMerchantUser: async (req) => {
      const input = parseOrThrow(MerchantLoginRequest, req);
      const { email } = input;
      const em = orm.em.fork();
      const locked = (seconds: number) =>
        new DomainError('account_locked', `Too many failed sign-ins; try again in ${seconds} second(s).`, { retryAfterSeconds: seconds });
      // Locked like customer login (contract §4): per email and client, even with the right password.
      const lockedFor = await lockout.secondsLocked(em, email, req.client);
      if (lockedFor) throw locked(lockedFor);
      const user = await em.findOne(MerchantUser, byEmail(email));
      const ok = user ? await hasher.verify(input.password, user.passwordHash) : await hasher.verifyAgainstNothing(input.password);
      // An inactive user fails like a wrong password, and counts like one.
      if (!user || !ok || !user.isActive) {
        const nowLocked = await lockout.recordFailure(em, email, req.client);
        if (nowLocked) throw locked(nowLocked);
        throw new DomainError('unauthenticated', 'Invalid email or password.');
      }
      const stillLocked = await lockout.recordSuccess(em, email, req.client);
      if (stillLocked) throw locked(stillLocked);
      // The password check takes a good fraction of a second, and the user may have been
      // deactivated or given another role meanwhile: that change revoked only the tokens issued
      // before it, so a token built from the row read above would outlive it. The token is issued
      // from the row as it is now, held (FOR SHARE) while its iat is taken: a change either
      // committed first (and is seen here) or waits, and then revokes this token too.
      return orm.em.fork().transactional(async (tx) => {
        const current = await tx.findOne(MerchantUser, { id: user.id }, { lockMode: LockMode.PESSIMISTIC_READ });
        if (!current || !current.isActive || current.passwordHash !== user.passwordHash) throw new DomainError('unauthenticated', 'Invalid email or password.');
        const { token, expiresAt } = await issuer.issue('merchantUser', current.id, { mid: current.merchantId, role: current.role, iat_ms: Date.now() }, MERCHANT_TOKEN_TTL_SECONDS);
        return { token, expiresAt: expiresAt.toISOString(), user: current.toView() };
      });
    },
  };
}
