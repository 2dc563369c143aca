#!/usr/bin/env node
// Runs every benchmark in bench/*.bench.mjs (or those whose file name contains one of the
// arguments), each against a fresh platform on a fresh database, and prints one table.
//
//   npm run bench                      all benchmarks (builds, brings up Postgres first)
//   npm run bench -- subscriptions     only bench/*subscriptions*.bench.mjs
//
// A benchmark module exports `name` and `async run({ platform, databaseUrl })` returning rows
// `{ name, connections?, rps, p50, p99, non2xx?, errors?, ratio? }` (latencies in ms). It may
// export `env` (env overrides for every service), `serviceEnv` (per service) and `services`
// (which services to start; default every built one).
// Environment: DATABASE_URL (a server; a database is created on it per benchmark and dropped),
// NATS_SERVER_BIN or NATS_URL, BENCH_DURATION (seconds per measurement, default 10).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { findNatsServer, startNatsServer } from '../scripts/lib/nats.mjs';
import { startPlatform } from '../scripts/lib/start-platform.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Env of every benchmark's services: limits far above what one machine can send, so the rate
 * limiter's cost is measured but no request is refused by it. A benchmark's `env` overrides.
 */
const BENCH_ENV = { RATE_LIMIT_PER_SECOND: '1000000', RATE_LIMIT_BURST: '1000000' };

async function onServer(serverUrl, fn) {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh database on the server; named like test databases so launchers drop leftovers. */
async function createDatabase(serverUrl) {
  const name = `bp_test_bench_${randomBytes(5).toString('hex')}`;
  await onServer(serverUrl, (c) => c.query(`create database ${c.escapeIdentifier(name)}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => onServer(serverUrl, (c) => c.query(`drop database if exists ${c.escapeIdentifier(name)} with (force)`)) };
}

/** A private nats-server when a binary is available, else the one in NATS_URL. */
async function startNats() {
  const bin = findNatsServer();
  if (!bin) {
    if (!process.env.NATS_URL) throw new Error('no nats-server binary (NATS_SERVER_BIN or PATH) and NATS_URL is not set');
    return { url: process.env.NATS_URL, stop: async () => {} };
  }
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-nats-'));
  const server = await startNatsServer({ bin, storeDir });
  return {
    url: server.url,
    stop: async () => {
      await server.stop();
      fs.rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

const fmt = (v, digits = 0) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : '');

function printTable(rows) {
  const header = ['benchmark', 'measurement', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'ratio'];
  const lines = rows.map((r) => [r.bench, r.name, fmt(r.connections), fmt(r.rps), fmt(r.p50, 1), fmt(r.p99, 1), fmt(r.non2xx), fmt(r.errors), fmt(r.ratio, 2)]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (cells) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}`);
  for (const l of lines) console.log(line(l));
  console.log('');
}

async function main() {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) throw new Error('DATABASE_URL is not set; run `npm run bench`');
  const filters = process.argv.slice(2);
  const files = fs
    .readdirSync(here)
    .filter((f) => f.endsWith('.bench.mjs'))
    .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
    .sort();
  if (files.length === 0) throw new Error(`no benchmark matches ${filters.join(', ') || '*.bench.mjs'}`);

  const results = [];
  let failed = false;
  for (const file of files) {
    const bench = await import(pathToFileURL(path.join(here, file)).href);
    const label = bench.name ?? file.replace(/\.bench\.mjs$/, '');
    console.log(`bench: ${label}: starting a fresh platform`);
    const database = await createDatabase(serverUrl);
    const nats = await startNats();
    // The services' files (emails, the sandbox provider's ledger) in a directory of this run's own.
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-data-'));
    let platform;
    try {
      platform = await startPlatform({
        databaseUrl: database.url,
        natsUrl: nats.url,
        mode: 'test',
        logLevel: 'warn',
        services: bench.services,
        env: { ...BENCH_ENV, DATA_DIR: dataDir, ...bench.env },
        serviceEnv: bench.serviceEnv,
        ports: 'free',
        host: '127.0.0.1',
        migrate: true,
        onLog: process.env.BENCH_LOGS === '1' ? (name, line) => process.stderr.write(`${name} | ${line}\n`) : undefined,
      });
      console.log(`bench: ${label}: measuring`);
      const rows = await bench.run({ platform, databaseUrl: database.url });
      for (const row of rows) results.push({ bench: label, ...row });
      printTable(rows.map((r) => ({ bench: label, ...r })));
    } catch (e) {
      failed = true;
      console.error(`bench: ${label} failed: ${e instanceof Error ? e.stack : e}`);
    } finally {
      await platform?.stop();
      await nats.stop();
      await database.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
  console.log('bench: all results');
  printTable(results);
  if (failed) process.exitCode = 1;
}

main().catch((e) => {
  console.error(`bench: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
});
