/** Merchants whose names are kept at most; past it the oldest entry makes room. */
export const MERCHANT_NAMES_MAX = 1_000;

interface Entry {
  /** The lookup's answer, shared by every caller while it is in flight. */
  name: Promise<string>;
  /** When the lookup was started (ms since the epoch): the name is at least as fresh as that. */
  startedAt: number;
  settled: boolean;
}

/**
 * Merchants' names for invitation emails, each kept `ttlMs` after the lookup that read it was
 * started, so a renamed merchant's new name is used within `ttlMs`. Concurrent misses for one
 * merchant share one lookup (single flight); a failed lookup is not kept, so the next caller
 * asks again. `ttlMs` 0 turns the cache off: every call is a lookup of its own.
 */
export class MerchantNames {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly lookup: (merchantId: string) => Promise<string>,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  nameOf(merchantId: string): Promise<string> {
    if (this.ttlMs <= 0) return this.lookup(merchantId);
    const now = this.now();
    const cached = this.entries.get(merchantId);
    if (cached && (!cached.settled || now - cached.startedAt < this.ttlMs)) return cached.name;
    if (cached) this.entries.delete(merchantId);
    else if (this.entries.size >= MERCHANT_NAMES_MAX) this.entries.delete(this.entries.keys().next().value!);
    const entry: Entry = { name: this.lookup(merchantId), startedAt: now, settled: false };
    this.entries.set(merchantId, entry);
    entry.name.then(
      () => {
        entry.settled = true;
      },
      () => {
        if (this.entries.get(merchantId) === entry) this.entries.delete(merchantId);
      },
    );
    return entry.name;
  }
}
