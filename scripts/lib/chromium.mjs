// Headless Chromium for the browser tests (hosted pages, /docs): Debian's `chromium` package,
// driven by playwright-core. Found like nats-server, and installed with apt-get when missing
// and running as root.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const NAMES = ['chromium', 'chromium-browser'];
const SEARCH_DIRS = ['/usr/bin', '/usr/local/bin', '/snap/bin'];

export const CHROMIUM_INSTALL_HINT = [
  'Chromium was not found; the browser tests need it. Either:',
  '  - install it: apt-get install -y chromium (Debian/Ubuntu; as root the test command does this itself),',
  '    or your system\'s chromium package;',
  '  - or point CHROMIUM_PATH at a Chromium or Chrome binary.',
].join('\n');

/** @param {string} file */
function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Path of the Chromium binary: CHROMIUM_PATH, PATH, or the usual system directories. With
 * `install`, when running as root on a system with apt-get, installs Debian's `chromium`
 * package if nothing is found.
 * @param {{ install?: boolean, log?: (msg: string) => void }} [opts]
 * @returns {string | undefined}
 */
export function findChromium(opts = {}) {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) {
    if (isExecutable(fromEnv)) return fromEnv;
    throw new Error(`CHROMIUM_PATH=${fromEnv} is not an executable file`);
  }
  const search = () => {
    const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...SEARCH_DIRS];
    for (const dir of dirs) for (const name of NAMES) if (isExecutable(path.join(dir, name))) return path.join(dir, name);
    return undefined;
  };
  const found = search();
  if (found || !opts.install) return found;
  const aptGet = ['/usr/bin/apt-get', '/bin/apt-get'].find(isExecutable);
  if (process.getuid?.() !== 0 || !aptGet) return undefined;
  opts.log?.('chromium not found; installing it with apt-get (browser tests)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync(aptGet, ['install', '-y', '--no-install-recommends', 'chromium'], { stdio: 'inherit', env }).status === 0;
  if (!install()) {
    spawnSync(aptGet, ['update'], { stdio: 'inherit', env });
    install();
  }
  return search();
}
