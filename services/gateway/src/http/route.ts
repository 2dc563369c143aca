import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DomainError } from '@billing/contracts';
import type { z, ZodType } from 'zod';
import type { AuthRequirement } from '../auth/access.js';
import type { Principal } from '../auth/principal.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

type Infer<S> = S extends ZodType ? z.output<S> : undefined;

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** Undefined only on anonymous routes. */
  principal: Principal;
  request: FastifyRequest;
  reply: FastifyReply;
}

/** What a handler answers: a status, an optional body and extra headers. */
export interface RouteResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Default: JSON below 400, problem details from 400 (set it for results that are not problems). */
  contentType?: string;
}

/**
 * One HTTP endpoint: its path, who may call it, the zod schemas of its inputs and outputs (the
 * same ones the OpenAPI document is generated from) and a thin handler that forwards to a
 * backing service.
 */
export interface RouteSpec<PS extends ZodType | undefined = any, QS extends ZodType | undefined = any, BS extends ZodType | undefined = any> {
  method: HttpMethod;
  url: string;
  tag: string;
  summary: string;
  description?: string;
  auth: AuthRequirement;
  params?: PS;
  query?: QS;
  body?: BS;
  /** Status → response schema (null: no body). Errors are problem details unless given a schema here. */
  responses: Record<number, ZodType | null>;
  /** Requires an `Idempotency-Key` header and replays outcomes (interface.md idempotency rules). */
  idempotent?: boolean;
  /**
   * The merchant owning the resource the path parameter `param` names, asked only for the
   * platform admin on an idempotent route whose body names no merchant: its keys are then scoped
   * to that merchant, as the merchant's own are (contract §3: (merchant, key)).
   */
  ownerOf?: { param: string; merchantOf(id: string): Promise<string> };
  /** OpenAPI operationId; by default derived from method and path (`operationIdOf`). */
  operationId?: string;
  /** Examples shown in the API reference: a request body, and response bodies by status. */
  examples?: { request?: unknown; responses?: Record<number, unknown> };
  /**
   * What a route answers for a body that fails its schema, or is refused with a 400 before the
   * route runs (malformed JSON, text no service may store), when that is not a problem (checkout
   * completion answers a completion result: interface.md); by default the problem. `principal` is
   * the caller's when its credential was admitted, else undefined.
   */
  invalidBody?: (failure: DomainError, principal: Principal | undefined) => RouteResult | Promise<RouteResult>;
  /** False for routes the rate limiter skips (none today); documents the RateLimit-* headers and 429 otherwise. */
  rateLimited?: false;
  handler: (ctx: RouteContext<Infer<PS>, Infer<QS>, Infer<BS>>) => Promise<RouteResult>;
}

export function defineRoute<PS extends ZodType | undefined, QS extends ZodType | undefined, BS extends ZodType | undefined>(
  spec: RouteSpec<PS, QS, BS>,
): RouteSpec<PS, QS, BS> {
  return spec;
}

export const ok = (body: unknown): RouteResult => ({ status: 200, body });
export const created = (body: unknown, location: string): RouteResult => ({ status: 201, body, headers: { location } });
export const noContent = (): RouteResult => ({ status: 204 });
