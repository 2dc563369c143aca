// Installing and building the workspace. Uses only Node built-ins: it runs before node_modules exists.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { run } from './processes.mjs';

const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';
/** Hash of the package-lock.json node_modules was last installed from or checked against. */
const STAMP = path.join('node_modules', '.platform-lock-sha256');

/** @param {string} file */
function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

/** @param {string} file */
function sha256(file) {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/**
 * Runs `npm ci` when node_modules is missing or package-lock.json is newer than the last
 * install (`npm install` when there is no lock file, or when `npm ci` refuses the lock).
 * A lock file whose mtime changed without its content changing (git checkout, rebase) does not
 * count as newer, so node_modules is not wiped under other processes for nothing.
 * @param {string} root
 * @param {(msg: string) => void} log
 */
export async function ensureDependencies(root, log) {
  const lockFile = path.join(root, 'package-lock.json');
  const stampFile = path.join(root, STAMP);
  const lock = mtime(lockFile);
  const installed = mtime(path.join(root, 'node_modules', '.package-lock.json'));
  if (lock === undefined) {
    if (installed !== undefined) return;
    log('node_modules is missing and there is no package-lock.json: running npm install');
    if ((await run(NPM, ['install'], { cwd: root })) !== 0) throw new Error('npm install failed');
    return;
  }
  const hash = sha256(lockFile);
  const stamp = fs.existsSync(stampFile) ? fs.readFileSync(stampFile, 'utf8').trim() : undefined;
  if (installed !== undefined && (installed >= lock || stamp === hash)) {
    if (stamp !== hash) fs.writeFileSync(stampFile, hash);
    return;
  }
  log(installed === undefined ? 'node_modules is missing: running npm ci' : 'package-lock.json changed since the last install: running npm ci');
  if ((await run(NPM, ['ci'], { cwd: root })) !== 0) {
    // Typically a lock file npm ci calls out of sync with package.json; npm install reconciles it.
    log('npm ci failed; trying npm install (check package-lock.json afterwards)');
    if ((await run(NPM, ['install'], { cwd: root })) !== 0) throw new Error('npm ci and npm install failed');
  }
  fs.writeFileSync(stampFile, sha256(lockFile));
}

/**
 * `npx turbo run build`, printing only the output of failing tasks.
 * @param {string} root
 * @param {(msg: string) => void} log
 */
export async function buildAll(root, log) {
  log('building (npx turbo run build)');
  const code = await run(NPX, ['turbo', 'run', 'build', '--continue', '--output-logs=errors-only'], { cwd: root });
  if (code !== 0) throw new Error('the build failed (see above). Set PLATFORM_SKIP_BUILD=1 to run with what is already built.');
}
