import type { Logger } from '@billing/service-runtime';
import { untraced } from '@billing/telemetry';
import type { IdentityClients } from '../backends/clients.js';

interface Change {
  kind: string;
  subjectId: string;
  revoked: boolean;
  at: string;
}

/**
 * Follows identity's credential-change feed so every gateway replica learns of revoked keys,
 * deactivated users and suspended customers within one poll interval, without a database
 * round trip per request. The replica that served a revocation applies it at once.
 */
export class CredentialFeed {
  private cursor = '0';
  private readonly revokedKeys = new Set<string>();
  /** subject id → revocation time (ms): tokens issued at or before it are no longer valid. */
  private readonly revokedSubjects = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private readonly listeners: Array<(kind: string, subjectId: string) => void> = [];
  private synced = false;

  constructor(
    private readonly identity: IdentityClients,
    private readonly logger: Logger,
    private readonly pollMs: number,
  ) {}

  async start(): Promise<void> {
    await this.poll().catch((e) => this.logger.warn({ err: e }, 'credential feed not reachable yet'));
    const loop = async () => {
      await this.poll().catch((e) => this.logger.debug({ err: e }, 'credential feed poll failed'));
      this.timer = setTimeout(loop, this.pollMs);
      this.timer.unref();
    };
    this.timer = setTimeout(loop, this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  onRevoked(listener: (kind: string, subjectId: string) => void): void {
    this.listeners.push(listener);
  }

  isKeyRevoked(apiKeyId: string): boolean {
    return this.revokedKeys.has(apiKeyId);
  }

  /** Whether a token for `subjectId` issued at `issuedAtMs` was revoked after issue. */
  isTokenRevoked(subjectId: string, issuedAtMs: number): boolean {
    const at = this.revokedSubjects.get(subjectId);
    return at !== undefined && issuedAtMs <= at;
  }

  get isSynced(): boolean {
    return this.synced;
  }

  /** Applies a change this replica caused, before the feed reports it. */
  apply(change: Change): void {
    if (!change.revoked) return;
    if (change.kind === 'api_key') this.revokedKeys.add(change.subjectId);
    else this.revokedSubjects.set(change.subjectId, Math.max(this.revokedSubjects.get(change.subjectId) ?? 0, Date.parse(change.at)));
    for (const l of this.listeners) l(change.kind, change.subjectId);
  }

  /** Polling is not traced: it would start a trace several times a second. */
  private poll(): Promise<void> {
    return untraced(() => this.pollChanges());
  }

  private async pollChanges(): Promise<void> {
    for (;;) {
      const res = await this.identity.credentials.ListCredentialChanges({ afterCursor: this.cursor }, { deadlineMs: 2000 });
      for (const c of res.changes) this.apply(c);
      const advanced = res.cursor !== this.cursor;
      this.cursor = res.cursor;
      this.synced = true;
      if (!advanced || res.changes.length < 1000) return;
    }
  }
}
