import { isUuidText } from '@billing/contracts';
import { merchantOf, type Principal } from '../auth/principal.js';
import type { RouteSpec } from '../http/route.js';

/**
 * The merchant a credential without one of its own (the platform admin) acts for on an
 * idempotent request, for the key's scope: the merchant the body names, else the owner of the
 * resource the path names (`RouteSpec.ownerOf`, one lookup, made for the admin only).
 * Undefined for every other credential, and when neither tells (the request then fails on its
 * own, or the admin's key keeps a scope of its own).
 */
export async function actingFor(spec: RouteSpec, principal: Principal | undefined, request: { body?: unknown; params?: unknown }): Promise<string | undefined> {
  if (!principal || merchantOf(principal) !== undefined) return undefined;
  const named = (request.body as { merchantId?: unknown } | undefined)?.merchantId;
  if (typeof named === 'string' && isUuidText(named)) return named.toLowerCase();
  if (!spec.ownerOf) return undefined;
  const id = (request.params as Record<string, unknown> | undefined)?.[spec.ownerOf.param];
  if (typeof id !== 'string' || !isUuidText(id)) return undefined;
  try {
    return (await spec.ownerOf.merchantOf(id.toLowerCase())).toLowerCase();
  } catch {
    return undefined; // unknown id: the request itself answers 404
  }
}
