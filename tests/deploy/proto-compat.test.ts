import { execFile, execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * gRPC contracts stay deployable service by service: `buf lint` (buf.yaml's rules) and
 * `buf breaking` of the working tree's proto/ against the previous commit's (HEAD~1, or
 * BUF_BREAKING_AGAINST), read from the local git repository with the buf binary of the
 * `@bufbuild/buf` npm package: no network.
 */
const root = resolve(import.meta.dirname, '../..');
const buf = join(root, 'node_modules/.bin/buf');
const run = promisify(execFile);
const against = process.env.BUF_BREAKING_AGAINST ?? 'HEAD~1';

function hasCommit(ref: string): boolean {
  try {
    execFileSync('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { cwd: root, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const output = (e: any) => `${e.stdout ?? ''}${e.stderr ?? ''}`.trim();

describe('proto contracts', () => {
  it('pass buf lint', async () => {
    const out = await run(buf, ['lint'], { cwd: root }).then(output, output);
    expect(out).toBe('');
  });

  // A shallow clone has no previous commit to compare with (CI must fetch with depth ≥ 2).
  it.skipIf(!hasCommit(against))(`have no breaking change against ${against} (buf breaking)`, async () => {
    const out = await run(buf, ['breaking', '--against', `.git#ref=${against},subdir=proto`], { cwd: root }).then(output, output);
    expect(out, `breaking changes against ${against}; if deliberate, acknowledge them in buf.yaml (README, Operations)`).toBe('');
    console.info(`buf breaking against ${against}: no breaking changes`);
  });
});
