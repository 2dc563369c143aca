// Headless Chromium for the browser tests (hosted pages, /docs): Debian's `chromium` package,
// driven by playwright-core. Found like nats-server, and installed with apt-get when missing
// and running as root.
import { findSystemBinary } from './system-binary.mjs';

const NAMES = ['chromium', 'chromium-browser'];
const SEARCH_DIRS = ['/usr/bin', '/usr/local/bin', '/snap/bin'];

export const CHROMIUM_INSTALL_HINT = [
  'Chromium was not found; the browser tests need it. Either:',
  '  - install it: apt-get install -y chromium (Debian/Ubuntu; as root the test command does this itself),',
  '    or your system\'s chromium package;',
  '  - or point CHROMIUM_PATH at a Chromium or Chrome binary.',
].join('\n');

/**
 * Path of the Chromium binary: CHROMIUM_PATH, PATH, or the usual system directories. With
 * `install`, when running as root on a system with apt-get, installs Debian's `chromium`
 * package if nothing is found.
 * @param {{ install?: boolean, log?: (msg: string) => void }} [opts]
 * @returns {string | undefined}
 */
export function findChromium(opts = {}) {
  return findSystemBinary({ envVar: 'CHROMIUM_PATH', names: NAMES, dirs: SEARCH_DIRS, aptPackage: 'chromium', reason: 'browser tests', ...opts });
}
