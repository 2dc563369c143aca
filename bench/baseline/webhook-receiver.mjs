// A webhook endpoint for the webhooks benchmark, in its own process so its CPU is not the
// benchmark driver's: verifies every request's Standard Webhooks signature (HMAC-SHA256 over
// "{id}.{timestamp}.{body}", constant-time compare, 5-minute timestamp tolerance) with
// node:crypto, as a production receiver would; the `standardwebhooks` library (pure-JS HMAC,
// several times slower) verifies the same scheme in the end-to-end tests. Records when each
// webhook-id first arrived. Controlled over IPC:
//   { secret }  verify with this whsec_ secret       { report }  reply { arrivals, duplicates, invalid }
//   { reset }   forget what arrived
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createHmac, timingSafeEqual } from 'node:crypto';

let key;

/** Throws unless the headers carry a valid, fresh v1 signature of the body. */
function verify(body, headers) {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs) throw new Error('missing headers');
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) throw new Error('stale timestamp');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest();
  const ok = sigs.split(' ').some((s) => {
    const [v, b64] = s.split(',');
    const got = Buffer.from(b64 ?? '', 'base64');
    return v === 'v1' && got.length === expected.length && timingSafeEqual(got, expected);
  });
  if (!ok) throw new Error('bad signature');
}
let arrivals = new Map();
let duplicates = 0;
let invalid = 0;
const now = () => performance.timeOrigin + performance.now();

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = now();
    const body = Buffer.concat(chunks).toString('utf8');
    try {
      verify(body, req.headers);
      const id = req.headers['webhook-id'];
      if (arrivals.has(id)) duplicates++;
      else arrivals.set(id, at);
      res.writeHead(204).end();
    } catch {
      invalid++;
      res.writeHead(400).end();
    }
  });
});
server.keepAliveTimeout = 30_000;

process.on('message', (msg) => {
  if (msg.secret) {
    key = Buffer.from(msg.secret.slice('whsec_'.length), 'base64');
    process.send({ ok: true });
  } else if (msg.reset) {
    arrivals = new Map();
    duplicates = 0;
    invalid = 0;
    process.send({ ok: true });
  } else if (msg.report) {
    process.send({ arrivals: [...arrivals], duplicates, invalid });
  }
});

server.listen(0, '127.0.0.1', () => process.stdout.write(`PORT ${server.address().port}\n`));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
