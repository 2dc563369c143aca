import { mkdir, open, readFile, rename, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * An append-only file of JSON lines: the sandbox provider's ledger as a real provider keeps it,
 * across restarts. Entries appended in one event-loop turn (and while a write is in flight) are
 * written together; `written()` resolves once every entry appended before the call is in the
 * file, which is when the provider answers. Written, not synced: it survives the process (a
 * restart, a crash, a kill), not a power loss.
 */
export class Journal {
  private lines: string[] = [];
  /** Settles when every write started so far has ended. */
  private tail: Promise<void> = Promise.resolve();
  /** The write that will take the lines appended since the last one started. */
  private queued?: Promise<void>;

  private constructor(
    private readonly file: FileHandle,
    private readonly onFailure: (e: unknown) => void,
  ) {}

  /**
   * Reads `path` (entries that do not parse, such as a line torn by a crash mid-write, are
   * skipped and counted), lets `replay` rebuild the state from them, rewrites the file as
   * `snapshot()` (so it holds one entry per item, not the history of each), and opens it for
   * appending. `onFailure`: a write failed (the entries waiting on it were not kept).
   */
  static async open<E>(
    path: string,
    replay: (entry: E) => void,
    snapshot: () => Iterable<E>,
    onFailure: (e: unknown) => void,
  ): Promise<{ journal: Journal; entries: number; skipped: number }> {
    await mkdir(dirname(path), { recursive: true });
    let text = '';
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    let entries = 0;
    let skipped = 0;
    for (const line of text.split('\n')) {
      if (!line) continue;
      let entry: E;
      try {
        entry = JSON.parse(line) as E;
      } catch {
        skipped++;
        continue;
      }
      replay(entry);
      entries++;
    }
    const fresh = `${path}.${process.pid}.tmp`;
    const out = await open(fresh, 'w', 0o600);
    try {
      let chunk: string[] = [];
      for (const entry of snapshot()) {
        chunk.push(JSON.stringify(entry));
        if (chunk.length >= 1000) {
          await out.appendFile(`${chunk.join('\n')}\n`);
          chunk = [];
        }
      }
      if (chunk.length) await out.appendFile(`${chunk.join('\n')}\n`);
      await out.sync();
    } finally {
      await out.close();
    }
    await rename(fresh, path);
    return { journal: new Journal(await open(path, 'a', 0o600), onFailure), entries, skipped };
  }

  append(entry: unknown): void {
    this.lines.push(JSON.stringify(entry));
  }

  /** Resolves once every entry appended so far is in the file; rejects if its write failed. */
  written(): Promise<void> {
    if (this.lines.length === 0) return this.tail;
    if (!this.queued) {
      const write = this.tail.then(() => {
        const batch = this.lines;
        this.lines = [];
        this.queued = undefined;
        return this.file.appendFile(`${batch.join('\n')}\n`);
      });
      this.queued = write;
      this.tail = write.catch((e: unknown) => this.onFailure(e));
    }
    return this.queued;
  }

  async close(): Promise<void> {
    await this.written().catch(() => undefined);
    await this.file.close();
  }
}
