// Every create and update that writes an outbox event or takes an Idempotency-Key, one row each,
// through the gateway with an API key and a fresh Idempotency-Key per request, beside a bare
// fastify doing one INSERT per request (bench/baseline/fastify-insert.mjs) with the same load in
// the same run. The baseline is measured right before every row (as many requests, after the
// same warm-up) and each row's ratio is to its own baseline, so that load from elsewhere on a
// shared machine, which comes and goes within a run, skews a ratio less than it skews req/s.
// The baseline rows show the first and the slowest and fastest of those measurements.
//
// Rows chain: members created before the first row receive the payment methods and the
// subscriptions, and the subscriptions created are then paused, resumed and cancelled; every
// request names a resource of its own (no two contend for one row lock). The members with a card
// are then subscribed and charged by a billing run through the sandbox provider, and their
// charges refunded; members with a card the provider declines are charged likewise, and their
// failed charges retried; the members without a payment method receive one from a provider
// token. Last, hosted checkout sessions are completed, and invitations' onboarding wizards (on a
// merchant of their own). The set-up goes through the API (the tokens through the provider),
// unmeasured. The RSS of every service is read before the first request (idle) and after the
// last (loaded), and each service's CPU time per request of every row is printed (from /proc;
// unlike req/s it hardly moves with load from elsewhere, so it says where the time goes even on
// a busy machine).
//
// BENCH_WRITES: measured requests per row (default 2000; each row is also warmed up with a fifth
// of that, at least two requests per connection; the checkout and onboarding completions run a
// tenth of it, at least 200, after two per connection). BENCH_WRITES_ROWS: comma-separated substrings;
// only rows whose name contains one are reported (all still run: later rows use what earlier
// ones created). BENCH_WRITES_PROCESSES=1: print, per row, each service's longest event-loop
// delay, GC pauses and RSS while it ran. BENCH_PG_STATEMENTS=<n>: print, per row, the n
// statements Postgres spent the most time executing during it (needs the pg_stat_statements
// module loaded by the server: `shared_preload_libraries = 'pg_stat_statements'`).
import { createHmac, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { call, cpuMs, inParallel, loadRequests, machineCpuMs, postgresCpuMs, rssMb, spawnWithPort, standInForAutovacuum, watchProcesses } from './load.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const name = 'writes';

/**
 * BENCH_STALL_TRACE=<dir>: every service records its event-loop stalls and GC pauses there
 * (bench/stall-trace.cjs), with the rows' time windows in rows.json; summarise them after the
 * run with `node bench/stall-summary.mjs <dir>`.
 */
const STALL_TRACE = process.env.BENCH_STALL_TRACE ? path.resolve(process.env.BENCH_STALL_TRACE) : undefined;
if (STALL_TRACE) fs.mkdirSync(STALL_TRACE, { recursive: true });
/** BENCH_CPU_PROFILE=<dir> (with bench/cpu-profile.cjs preloaded): the rows' windows go there too, for bench/profile-summary.mjs. */
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE ? path.resolve(process.env.BENCH_CPU_PROFILE) : undefined;
if (CPU_PROFILE) fs.mkdirSync(CPU_PROFILE, { recursive: true });
const nodeOptions = [process.env.BENCH_NODE_OPTIONS, STALL_TRACE && `-r ${path.join(here, 'stall-trace.cjs')}`, CPU_PROFILE && `-r ${path.join(here, 'cpu-profile.cjs')}`].filter(Boolean).join(' ');

/** BENCH_NODE_OPTIONS: NODE_OPTIONS of every service (e.g. V8 heap flags to compare). */
// The scheduled billing run is off: the subscriptions the rows create are due at once, and a
// run charging them during later rows would be measured as those rows' cost (the transaction
// rows start the runs they need themselves).
export const env = {
  BILLING_RUN_INTERVAL_MS: '0',
  ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
  ...(STALL_TRACE ? { BENCH_STALL_TRACE: STALL_TRACE } : {}),
  ...(CPU_PROFILE ? { BENCH_CPU_PROFILE: CPU_PROFILE } : {}),
};
const rowWindows = [];

const PG_STATEMENTS = Number(process.env.BENCH_PG_STATEMENTS ?? 0);

/**
 * With BENCH_PG_STATEMENTS, the statements of the bench database Postgres spent the most time
 * executing between `reset()` and `report(label, requests)`, per request, with their planning time
 * (counted only with `pg_stat_statements.track_planning = on`) and the shared buffers each call
 * touched (pg_stat_statements is the server's: it sees every database, so the report
 * keeps to the platform's).
 */
async function pgStatements(databaseUrl) {
  if (!PG_STATEMENTS) return undefined;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('create extension if not exists pg_stat_statements');
    await client.query('select pg_stat_statements_reset()');
  } catch (e) {
    await client.end();
    console.warn(`bench: BENCH_PG_STATEMENTS needs pg_stat_statements loaded by the server (${e.message})`);
    return undefined;
  }
  return {
    reset: () => client.query('select pg_stat_statements_reset()'),
    async report(label, requests) {
      const { rows } = await client.query(
        `select calls, rows, total_exec_time, total_plan_time, shared_blks_hit + shared_blks_read as blocks, regexp_replace(query, '\\s+', ' ', 'g') as query from pg_stat_statements
          where dbid = (select oid from pg_database where datname = current_database()) order by total_exec_time desc limit $1`,
        [PG_STATEMENTS],
      );
      const all = await client.query(
        `select coalesce(sum(total_exec_time), 0) as t, coalesce(sum(total_plan_time), 0) as p, coalesce(sum(wal_bytes), 0) as wal from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`,
      );
      console.log(
        `bench: ${label}: Postgres statements by execution time (all: ${Math.round((all.rows[0].t * 1000) / requests)} µs executing, ${Math.round((all.rows[0].p * 1000) / requests)} µs planning and ${Math.round(all.rows[0].wal / requests)} WAL bytes per request; each: calls, rows, µs executing and planning per request, buffers per call)`,
      );
      for (const r of rows) {
        const per = (v) => (Number(v) / requests).toFixed(2).padStart(6);
        // Buffers per call: a statement that should touch a few rows by key but reads hundreds scans.
        const blocks = Number(r.calls) ? Math.round(Number(r.blocks) / Number(r.calls)) : 0;
        console.log(`  ${per(r.calls)} ${per(r.rows)} ${String(Math.round((r.total_exec_time * 1000) / requests)).padStart(5)} ${String(Math.round((r.total_plan_time * 1000) / requests)).padStart(5)} ${String(blocks).padStart(6)}  ${r.query.slice(0, 150)}`);
      }
    },
    end: () => client.end(),
  };
}

const REQUESTS = Math.max(200, Number(process.env.BENCH_WRITES ?? 2000));
const ONLY = (process.env.BENCH_WRITES_ROWS ?? '').split(',').map((s) => s.trim()).filter(Boolean);

/** The ids of the resources the answers describe, in request order. */
const idsOf = (answers) => answers.filter(Boolean).map((a) => a.id);

export async function run({ platform, connections = 64 }) {
  const WARMUP = Math.max(2 * connections, Math.ceil(REQUESTS / 5));
  const gw = platform.gatewayUrl;
  const admin = platform.adminToken;
  const merchant = await call(gw, 'POST', '/api/admin/merchants', admin, { name: 'Bench Writes Co', contactEmail: 'bench-writes@example.com' }, [201]);
  const { key, id: apiKeyId, signingSecret } = await call(gw, 'POST', `/api/admin/merchants/${merchant.id}/api-keys`, admin, { name: 'bench' }, [201]);
  const merchantId = merchant.id;
  const product = await call(gw, 'POST', '/api/Products', key, { merchantId, name: 'Bench product' }, [201]);
  const plan = await call(gw, 'POST', '/api/Plans', key, { merchantId, productId: product.id, name: 'Monthly', amount: 19.95, interval: 'Month' }, [201]);
  const auth = { authorization: `Bearer ${key}` };
  const tag = randomUUID().slice(0, 8);
  const total = WARMUP + REQUESTS;
  // The checkout and onboarding completions are each a dozen calls between services and cost
  // their set-up several more per request: they run a tenth as many (at least 200), after a
  // warm-up of two per connection.
  const SLOW_WARMUP = 2 * connections;
  const slowTotal = SLOW_WARMUP + Math.max(200, Math.ceil(REQUESTS / 10));

  const cpu = () => ({ ...Object.fromEntries(Object.entries(platform.processes).map(([n, p]) => [n, p.pid ? cpuMs(p.pid) : undefined])), postgres: postgresCpuMs() });
  const cpuRows = [];
  const rss = () => Object.fromEntries(Object.entries(platform.processes).map(([n, p]) => [n, p.pid ? rssMb(p.pid) : undefined]));
  const idleRss = rss();

  const statements = await pgStatements(platform.databaseUrl);
  const baselineProc = await spawnWithPort(path.join(here, 'baseline/fastify-insert.mjs'), { DATABASE_URL: platform.databaseUrl });
  const scratch = Array.from({ length: total }, () => ({ body: { memberId: randomUUID(), planId: randomUUID() } }));
  const baselines = [];
  const baselineRun = async () => {
    const url = `http://127.0.0.1:${baselineProc.port}/scratch`;
    await loadRequests({ url, connections, headers: {}, requests: scratch.slice(0, WARMUP) });
    const before = cpuMs(baselineProc.pid);
    const pgBefore = postgresCpuMs();
    const b = await loadRequests({ url, connections, headers: {}, requests: scratch.slice(WARMUP) });
    b.cpuPerRequest = ((cpuMs(baselineProc.pid) - before) * 1000) / b.requests;
    b.postgresCpuPerRequest = pgBefore === undefined ? undefined : ((postgresCpuMs() - pgBefore) * 1000) / b.requests;
    baselines.push(b);
    return b;
  };

  const sandboxUrl = platform.processes['sandbox-provider'].address;
  /** A POST to the sandbox provider on the merchant's account; answers the 201's body. */
  const sandbox = async (urlPath, body) => {
    const res = await fetch(`${sandboxUrl}${urlPath}`, { method: 'POST', headers: { 'content-type': 'application/json', 'sandbox-account': merchantId }, body: JSON.stringify(body) });
    if (res.status !== 201) throw new Error(`sandbox POST ${urlPath}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  /**
   * Subscribes each member to the plan, runs billing now, and answers the ids of the merchant's
   * charges with `status`, as many as members (listed until all are there, in case a run still
   * holds some when the requested one answers).
   */
  const chargeMembers = async (members, status) => {
    await inParallel(members.length, 16, (i) => call(gw, 'POST', '/api/Subscriptions', key, { merchantId, memberId: members[i], planId: plan.id }, [201]));
    await call(gw, 'POST', '/api/admin/billing-runs', admin, { asOf: new Date().toISOString() }, [200]);
    const pageCount = Math.ceil(members.length / 200);
    for (let attempt = 0; ; attempt++) {
      const pages = await inParallel(pageCount, 4, (p) => call(gw, 'GET', `/api/Transactions?merchantId=${merchantId}&status=${status}&pageSize=200&page=${p + 1}`, key, undefined, [200]));
      const ids = pages.flatMap((p) => p.items.filter((t) => t.kind === 'Charge').map((t) => t.id));
      if (ids.length >= members.length) return ids.slice(0, members.length);
      if (attempt === 30) throw new Error(`only ${ids.length} of ${members.length} ${status} charges after the billing run`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };

  const rows = [];
  let announcedVacuum = false;
  /** Sends `requests` (WARMUP warm-up ones, then REQUESTS measured) and records a row unless filtered out. */
  const measureRow = async (label, requests, warmup = WARMUP) => {
    const vacuumMs = await standInForAutovacuum(platform.databaseUrl);
    if (vacuumMs !== undefined && !announcedVacuum) {
      announcedVacuum = true;
      console.log(`bench: the server runs without autovacuum; the bench vacuums and analyzes its database before each row, as autovacuum would (${Math.round(vacuumMs)} ms)`);
    }
    const baseline = await baselineRun();
    const warm = await loadRequests({ url: gw, connections, headers: auth, requests: requests.slice(0, warmup) });
    const watched = await watchProcesses(platform);
    const cpuBefore = cpu();
    let machineBefore;
    let machineAfter;
    await statements?.reset();
    const from = Date.now();
    // The machine's busy share over exactly the measured requests (first sent to last answered):
    // autocannon returns up to a second after the last answer, and that idle tail would dilute it.
    const real = await loadRequests({
      url: gw,
      connections,
      headers: auth,
      requests: requests.slice(warmup),
      onFirst: () => (machineBefore = machineCpuMs()),
      onLast: () => (machineAfter = machineCpuMs()),
    });
    const cpuAfter = cpu();
    // CPU per request of each service: unlike req/s, hardly moved by load from elsewhere.
    const cpuPerRequest = Object.fromEntries(Object.keys(cpuAfter).map((n) => [n, ((cpuAfter[n] - cpuBefore[n]) * 1000) / real.requests]));
    // How busy every core of the machine was meanwhile: near 100 % means the row is bound by CPU.
    const busy = machineBefore && machineAfter ? (100 * (machineAfter.busy - machineBefore.busy)) / (machineAfter.total - machineBefore.total) : NaN;
    cpuRows.push({ name: label, cpuPerRequest, busy });
    rowWindows.push({ name: label, from, to: Date.now() });
    for (const dir of [STALL_TRACE, CPU_PROFILE].filter(Boolean)) fs.writeFileSync(path.join(dir, 'rows.json'), JSON.stringify(rowWindows));
    const procs = await watched();
    await statements?.report(label, real.requests);
    if (process.env.BENCH_WRITES_PROCESSES === '1') {
      console.log(`bench: ${label}: ${real.rps.toFixed(0)} req/s, p99 ${real.p99} ms`);
      for (const [n, p] of Object.entries(procs)) {
        console.log(`  ${n.padEnd(16)} loop delay max ${p.loopMaxMs.toFixed(0)} ms p99 ${p.loopP99Ms.toFixed(0)} ms, major GCs ${p.majorGcs}, GC pauses > 40 ms ${p.gcOver40ms}, RSS ${p.rssMb.toFixed(0)} MB`);
      }
    }
    const bad = { ...warm.statuses, ...real.statuses };
    for (const s of Object.keys(bad)) if (Number(s) < 200 || Number(s) >= 300) console.warn(`bench: ${label}: statuses ${JSON.stringify(real.statuses)} (warm-up ${JSON.stringify(warm.statuses)})`);
    if (ONLY.length === 0 || ONLY.some((s) => label.includes(s))) rows.push({ name: label, connections, ...real, ratio: real.rps / baseline.rps });
  };

  try {
    // First, unmeasured, the members the later rows need (payment methods and subscriptions each
    // get their own), through the same route: this also warms every process up (JIT, pools), so
    // the first measured row is not charged for that.
    const memberBodies = Array.from({ length: total * 3 }, (_, i) => ({ merchantId, email: `w${i}-${tag}@bench.example.com`, firstName: 'Bench', lastName: `Member ${i}` }));
    const members = await inParallel(total * 2, 16, (i) => call(gw, 'POST', '/api/Members', key, memberBodies[i], [201]));
    const memberIds = idsOf(members);
    // Members: a new email each.
    await measureRow('POST /api/Members', memberBodies.slice(total * 2).map((body) => ({ path: '/api/Members', body })));

    await measureRow(
      'POST /api/members/{id}/payment-methods',
      memberIds.slice(0, total).map((id) => ({
        path: `/api/members/${id}/payment-methods`,
        body: { merchantId, memberId: id, type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040 },
      })),
    );

    const subMembers = memberIds.slice(total, total * 2);
    await measureRow('POST /api/Subscriptions', subMembers.map((memberId) => ({ path: '/api/Subscriptions', body: { merchantId, memberId, planId: plan.id } })));
    const pages = await inParallel(Math.ceil(total / 200), 4, (p) => call(gw, 'GET', `/api/Subscriptions?merchantId=${merchantId}&pageSize=200&page=${p + 1}`, key, undefined, [200]));
    const subIds = pages.flatMap((p) => p.items.map((s) => s.id));
    if (subIds.length < total) throw new Error(`only ${subIds.length} of ${total} subscriptions were created`);
    for (const op of ['pause', 'resume', 'cancel']) {
      await measureRow(`POST /api/Subscriptions/{id}/${op}`, subIds.map((id) => ({ path: `/api/Subscriptions/${id}/${op}`, body: op === 'cancel' ? { atPeriodEnd: false } : {} })));
    }

    await measureRow('POST /api/Products', Array.from({ length: total }, (_, i) => ({ path: '/api/Products', body: { merchantId, name: `Product ${i}` } })));
    await measureRow(
      'POST /api/Plans',
      Array.from({ length: total }, (_, i) => ({ path: '/api/Plans', body: { merchantId, productId: product.id, name: `Plan ${i}`, amount: 9.95, interval: 'Month' } })),
    );
    // One product per request, so question creates never wait for each other's product lock.
    const products = await inParallel(total, 16, (i) => call(gw, 'POST', '/api/Products', key, { merchantId, name: `Q product ${i}` }, [201]));
    await measureRow(
      'POST /api/Products/{id}/questions',
      products.map((p, i) => ({ path: `/api/Products/${p.id}/questions`, body: { merchantId, productId: p.id, text: `Question ${i}?`, kind: 'Text', required: false } })),
    );
    const plans = await inParallel(total, 16, (i) => call(gw, 'POST', '/api/Plans', key, { merchantId, productId: product.id, name: `P ${i}`, amount: 5, interval: 'Week' }, [201]));
    await measureRow('PATCH /api/Plans/{id}', plans.map((p, i) => ({ method: 'PATCH', path: `/api/Plans/${p.id}`, body: { name: `Renamed ${i}` } })));
    await measureRow('POST /api/ApiKeys', Array.from({ length: total }, (_, i) => ({ path: '/api/ApiKeys', body: { merchantId, name: `key ${i}` } })));
    await measureRow(
      'POST /api/Invitations',
      Array.from({ length: total }, (_, i) => ({ path: '/api/Invitations', body: { merchantId, firstName: 'Invited', lastName: `Person ${i}`, email: `inv${i}-${tag}@bench.example.com` } })),
    );
    await measureRow(
      'POST /api/Checkout/links',
      Array.from({ length: total }, () => ({ path: '/api/Checkout/links', body: { merchantId, planId: plan.id, returnUrl: 'http://127.0.0.1/return', apiKeyId } })),
    );

    // Refunds and retries need charges: the merchant gets provider credentials, so that billing
    // runs charge its subscriptions through the sandbox provider, which settles a card at once
    // and declines one ending in 0002.
    await call(gw, 'PUT', `/api/admin/merchants/${merchantId}/provider`, admin, { providerEnvironment: 'Staging', gatewayUsername: 'bench', gatewayPassword: 'bench-secret' }, [200]);
    // The members that received a card (4242) are subscribed and charged: one Settled charge each,
    // refunded in full.
    const settled = await chargeMembers(memberIds.slice(0, total), 'Settled');
    await measureRow('POST /api/Transactions/{id}/refund', settled.map((id) => ({ path: `/api/Transactions/${id}/refund`, body: { merchantId } })));

    // New members with a card the provider declines: one Failed charge each, retried once. The
    // retry is declined again, which the API answers 201 with the new Failed charge.
    const declining = idsOf(
      await inParallel(total, 16, (i) => call(gw, 'POST', '/api/Members', key, { merchantId, email: `d${i}-${tag}@bench.example.com`, firstName: 'Bench', lastName: `Declined ${i}` }, [201])),
    );
    await inParallel(total, 16, (i) =>
      call(gw, 'POST', `/api/members/${declining[i]}/payment-methods`, key, { merchantId, memberId: declining[i], type: 'Card', brand: 'Visa', last4: '0002', expiryMonth: 12, expiryYear: 2040 }, [201]),
    );
    const failed = await chargeMembers(declining, 'Failed');
    await measureRow('POST /api/Transactions/{id}/retry', failed.map((id) => ({ path: `/api/Transactions/${id}/retry`, body: { merchantId } })));

    // A card token per request, tokenised at the sandbox provider as a payment page would, for
    // the members whose subscriptions were cancelled above (they have no payment method yet).
    const tokens = await inParallel(total, 16, () => sandbox('/v1/card-tokens', { number: '4242424242424242', expiryMonth: 12, expiryYear: 2040 }));
    await measureRow(
      'POST /api/members/{id}/payment-methods/from-token',
      subMembers.map((memberId, i) => ({ path: `/api/members/${memberId}/payment-methods/from-token`, body: { merchantId, providerToken: tokens[i].token } })),
    );

    // A hosted checkout session per request, each for a buyer of its own, opened from a link
    // signed here as a merchant's own code signs it (the recipe in the description of POST
    // /api/Checkout/links) and given a bank account (capture-bank) as the page does; each request
    // completes its own session with that session's token. This set-up and the onboarding's run
    // 64 at a time, as many as the rows' connections: they are most of the bench's set-up time.
    const signedLink = (customer) => {
      const payload = { v: 1, kid: apiKeyId, mid: merchantId, pid: plan.id, nonce: randomUUID(), exp: Math.floor(Date.now() / 1000) + 3600, returnUrl: 'http://127.0.0.1/return', customer };
      const d = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
      return { d, s: createHmac('sha256', Buffer.from(signingSecret.replace(/^whsec_/, ''), 'base64')).update(d, 'ascii').digest('base64url') };
    };
    const sessions = await inParallel(slowTotal, 64, async (i) => {
      const link = signedLink({ email: `c${i}-${tag}@bench.example.com`, firstName: 'Bench', lastName: `Buyer ${i}` });
      const { sessionId, sessionToken } = await call(gw, 'POST', '/api/Checkout/sessions/resolve', undefined, link, [200]);
      const bank = { sessionId, accountName: 'Bench Buyer', bsb: '062-000', accountNumber: '12345678' };
      const { providerToken } = await call(gw, 'POST', '/api/Checkout/sessions/me/capture-bank', sessionToken, bank, [200]);
      return { sessionId, sessionToken, providerToken };
    });
    await measureRow(
      'POST /api/Checkout/sessions/me/complete',
      sessions.map((s) => ({ path: '/api/Checkout/sessions/me/complete', headers: { authorization: `Bearer ${s.sessionToken}` }, body: { sessionId: s.sessionId, providerToken: s.providerToken } })),
      SLOW_WARMUP,
    );

    // An invitation per request, accepted and its wizard filled (details, a card, the plan, whose
    // product asks nothing) by one of a few customers, who then completes it. A merchant of its
    // own, with one plan: accepting answers the merchant's active plans, and the bench merchant
    // has thousands by now. A few customers, not one per invitation: each signup hashes a
    // password (scrypt, most of a second of a core), and any customer may accept any invitation.
    const inviter = await call(gw, 'POST', '/api/admin/merchants', admin, { name: 'Bench Onboarding Co', contactEmail: 'bench-onboarding@example.com' }, [201]);
    const inviterKey = (await call(gw, 'POST', `/api/admin/merchants/${inviter.id}/api-keys`, admin, { name: 'bench' }, [201])).key;
    const inviterProduct = await call(gw, 'POST', '/api/Products', inviterKey, { merchantId: inviter.id, name: 'Bench membership' }, [201]);
    const inviterPlan = await call(gw, 'POST', '/api/Plans', inviterKey, { merchantId: inviter.id, productId: inviterProduct.id, name: 'Monthly', amount: 19.95, interval: 'Month' }, [201]);
    const customers = await inParallel(8, 8, (i) =>
      call(gw, 'POST', '/api/account/signup', undefined, { email: `cust${i}-${tag}@bench.example.com`, password: 'correct-horse-battery', firstName: 'Bench', lastName: `Customer ${i}`, dateOfBirth: '1990-01-01', acceptedTerms: true }, [200]),
    );
    const onboardings = await inParallel(slowTotal, 64, async (i) => {
      const token = customers[i % customers.length].token;
      const invited = await call(gw, 'POST', '/api/Invitations', inviterKey, { merchantId: inviter.id, firstName: 'Onboarded', lastName: `Person ${i}`, email: `onb${i}-${tag}@bench.example.com` }, [200]);
      const { invitationId } = invited;
      await call(gw, 'POST', '/api/onboard/accept', token, { token: invited.token }, [200]);
      await call(gw, 'PATCH', '/api/onboard/details', token, { invitationId, firstName: 'Onboarded', lastName: `Person ${i}`, phone: '+61 400 000 000', city: 'Sydney' }, [204]);
      await call(gw, 'POST', '/api/onboard/payment-method', token, { invitationId, type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040 }, [204]);
      await call(gw, 'PATCH', '/api/onboard/plan', token, { invitationId, planId: inviterPlan.id }, [204]);
      return { invitationId, token };
    });
    await measureRow(
      'POST /api/onboard/complete',
      onboardings.map((o) => ({ path: '/api/onboard/complete', headers: { authorization: `Bearer ${o.token}` }, body: { invitationId: o.invitationId } })),
      SLOW_WARMUP,
    );

    const byRps = [...baselines].sort((a, b) => a.rps - b.rps);
    const loadedRss = rss();
    const services = [...Object.keys(idleRss), 'postgres'];
    const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const baseCpu = median(baselines.map((b) => b.cpuPerRequest));
    const basePg = median(baselines.map((b) => b.postgresCpuPerRequest ?? NaN));
    // The CPU ratio: the baseline's CPU per request (its process and Postgres, medians of the run)
    // over the platform's (every service and Postgres; not NATS). Unlike the req/s ratio it hardly
    // moves with what else the machine does while a row or its baseline runs.
    console.log(`bench: CPU µs per request (10 ms resolution; the baseline process: ${Math.round(baseCpu)} median, PostgreSQL under it ${Math.round(basePg)}): ${services.join(', ')}, total; CPU ratio`);
    for (const r of cpuRows) {
      const total = services.reduce((sum, n) => sum + (r.cpuPerRequest[n] ?? 0), 0);
      const cpuRatio = (baseCpu + basePg) / total;
      console.log(`  ${r.name.padEnd(50)} ${[...services.map((n) => r.cpuPerRequest[n] ?? NaN), total].map((v) => String(Math.round(v)).padStart(6)).join(' ')}; ${cpuRatio.toFixed(2)}   machine busy ${Math.round(r.busy)} %`);
    }
    console.log('bench: RSS MB (idle → after the write rows)');
    for (const n of Object.keys(idleRss)) console.log(`  ${n.padEnd(16)} ${idleRss[n]?.toFixed(0) ?? '?'} → ${loadedRss[n]?.toFixed(0) ?? '?'}`);
    return [
      { name: 'baseline: fastify + one INSERT (first)', connections, ...baselines[0] },
      { name: 'baseline: fastify + one INSERT (slowest)', connections, ...byRps[0] },
      { name: 'baseline: fastify + one INSERT (fastest)', connections, ...byRps.at(-1) },
      ...rows,
      ...Object.keys(idleRss).map((n) => ({ name: `RSS MB ${n}: idle ${idleRss[n]?.toFixed(0)}, loaded ${loadedRss[n]?.toFixed(0)}` })),
    ];
  } finally {
    await statements?.end();
    await baselineProc.stop();
  }
}
