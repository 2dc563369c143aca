// Finding a system program the platform needs (nats-server, chromium), and installing its
// Debian package with apt-get when it is missing and the launcher runs as root.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** @param {string} file */
export function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Path of a program: the file in `envVar`, else the first of `names` on PATH or in `dirs`.
 * With `install`, when running as root on a system with apt-get, installs `aptPackage` if
 * nothing is found (running `apt-get update` first only when the plain install fails).
 * @param {{ envVar: string, names: string[], dirs: string[], aptPackage: string, reason: string,
 *           install?: boolean, log?: (msg: string) => void }} spec
 * @returns {string | undefined}
 */
export function findSystemBinary(spec) {
  const fromEnv = process.env[spec.envVar];
  if (fromEnv) {
    if (isExecutable(fromEnv)) return fromEnv;
    throw new Error(`${spec.envVar}=${fromEnv} is not an executable file`);
  }
  const search = () => {
    const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...spec.dirs];
    for (const dir of dirs) for (const name of spec.names) if (isExecutable(path.join(dir, name))) return path.join(dir, name);
    return undefined;
  };
  const found = search();
  if (found || !spec.install) return found;
  const aptGet = ['/usr/bin/apt-get', '/bin/apt-get'].find(isExecutable);
  if (process.getuid?.() !== 0 || !aptGet) return undefined;
  spec.log?.(`${spec.names[0]} not found; installing it with apt-get (${spec.reason})`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync(aptGet, ['install', '-y', '--no-install-recommends', spec.aptPackage], { stdio: 'inherit', env }).status === 0;
  if (!install()) {
    spawnSync(aptGet, ['update'], { stdio: 'inherit', env });
    install();
  }
  return search();
}
