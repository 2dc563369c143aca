// A webhook endpoint for the webhooks benchmark, in its own process so its CPU is not the
// benchmark driver's: verifies every request with the `standardwebhooks` library and records
// when each webhook-id first arrived. Controlled over IPC:
//   { secret }  verify with this whsec_ secret       { report }  reply { arrivals, duplicates, invalid }
//   { reset }   forget what arrived
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Webhook } from 'standardwebhooks';

let wh;
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
      wh.verify(body, req.headers);
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
    wh = new Webhook(msg.secret);
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
