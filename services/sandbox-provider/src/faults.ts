/**
 * Injected failures, so callers can be tested against a provider that is down or slow. A
 * fault may be limited to one merchant account, so one test's outage does not leak into
 * another's running against the same sandbox.
 */
export interface Fault {
  /** Answer 503 to every /v1 call. */
  down: boolean;
  /** Close the connection without answering (the caller sees a network error). */
  dropConnections: boolean;
  /** Delay before answering, in milliseconds. */
  latencyMs: number;
  /** Answer 500 to every /v1 call without acting on it (a provider failing internally). */
  failing: boolean;
}

const NONE: Fault = { down: false, dropConnections: false, latencyMs: 0, failing: false };

export class Faults {
  private global: Fault;
  private readonly perAccount = new Map<string, Fault>();

  constructor(initial: Partial<Fault> = {}) {
    this.global = { ...NONE, ...initial };
  }

  /** Merges `change` into the fault of `account` (or the global one when no account is named). */
  set(change: Partial<Fault>, account?: string): Fault {
    if (!account) return (this.global = { ...this.global, ...change });
    const next = { ...(this.perAccount.get(account) ?? NONE), ...change };
    this.perAccount.set(account, next);
    return next;
  }

  clear(account?: string): void {
    if (account) this.perAccount.delete(account);
    else {
      this.global = { ...NONE };
      this.perAccount.clear();
    }
  }

  /** The fault in effect for a call made for `account`: the stronger of global and per-account. */
  for(account: string | null): Fault {
    const own = account ? this.perAccount.get(account) : undefined;
    if (!own) return this.global;
    return {
      down: this.global.down || own.down,
      dropConnections: this.global.dropConnections || own.dropConnections,
      latencyMs: Math.max(this.global.latencyMs, own.latencyMs),
      failing: this.global.failing || own.failing,
    };
  }

  snapshot(): { global: Fault; accounts: Record<string, Fault> } {
    return { global: this.global, accounts: Object.fromEntries(this.perAccount) };
  }
}
