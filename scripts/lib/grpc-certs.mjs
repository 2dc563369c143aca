// The per-installation certificate authority and per-service certificates of the gRPC mutual
// TLS between the services, for development, tests and docker-compose (operators bring their
// own and point GRPC_TLS_CA / GRPC_TLS_CERT / GRPC_TLS_KEY at them).
//
// Node's crypto signs and parses X.509 but cannot issue a certificate, so the few DER
// structures of one are written here (ECDSA P-256, SHA-256): no openssl binary (absent from the
// node:20-slim image) and no npm dependency, and it runs before node_modules exists.
// Only Node built-ins are imported.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import path from 'node:path';

/** Services that hold a certificate; the subject common name of each is the service name. */
export const GRPC_PEERS = ['identity', 'billing', 'checkout', 'webhooks', 'gateway'];

const VALID_DAYS = 3650;

/** @param {number} n */
function derLength(n) {
  if (n < 0x80) return Buffer.from([n]);
  const bytes = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
/** @param {number} tag @param {Buffer[]} parts */
const tlv = (tag, ...parts) => {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
};
/** @param {Buffer[]} parts */
const seq = (...parts) => tlv(0x30, ...parts);
/** @param {string} dotted */
function oid(dotted) {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const bytes = [40 * /** @type {number} */ (a) + /** @type {number} */ (b)];
  for (const n of rest) {
    const chunk = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) chunk.unshift(0x80 | (v & 0x7f));
    bytes.push(...chunk);
  }
  return tlv(0x06, Buffer.from(bytes));
}
/** @param {Date} d */
const utcTime = (d) => tlv(0x17, Buffer.from(`${d.toISOString().slice(2, 19).replace(/[-T:]/g, '')}Z`));
/** @param {string} cn */
const name = (cn) => seq(tlv(0x31, seq(oid('2.5.4.10'), tlv(0x0c, Buffer.from('billing-platform')))), tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn)))));
/** @param {string} id @param {boolean} critical @param {Buffer} value */
const extension = (id, critical, value) => seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));
const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));

/** @param {import('node:crypto').KeyObject} publicKey */
function keyId(publicKey) {
  return createHash('sha1').update(publicKey.export({ type: 'spki', format: 'der' })).digest();
}

/**
 * A certificate's serial number: 16 random bytes read as a positive DER INTEGER in its minimal
 * form. The first byte is kept within 0x40-0x7f: a clear top bit keeps the number positive, and
 * a set next bit means it never starts with a zero byte, which OpenSSL refuses as illegal padding
 * when the byte after it is below 0x80 (it did, for one certificate in 256).
 * @param {Buffer} [bytes] 16 random bytes (a parameter for tests)
 * @returns {Buffer}
 */
export function certificateSerial(bytes = randomBytes(16)) {
  const serial = Buffer.from(bytes);
  serial[0] = (/** @type {number} */ (serial[0]) & 0x3f) | 0x40;
  return serial;
}

/**
 * @param {{ subject: string, publicKey: import('node:crypto').KeyObject, issuer: string,
 *   issuerKey: import('node:crypto').KeyObject, issuerPublicKey: import('node:crypto').KeyObject,
 *   ca: boolean, altNames?: string[] }} o
 * @returns {string} PEM
 */
function issueCertificate(o) {
  const serial = certificateSerial();
  const now = Date.now();
  const sans = (o.altNames ?? []).map((n) =>
    isIPv4(n) ? tlv(0x87, Buffer.from(n.split('.').map(Number))) : isIPv6(n) ? tlv(0x87, ipv6Bytes(n)) : tlv(0x82, Buffer.from(n)),
  );
  const extensions = [
    extension('2.5.29.19', true, o.ca ? seq(tlv(0x01, Buffer.from([0xff])), tlv(0x02, Buffer.from([0]))) : seq()),
    // keyCertSign + cRLSign for the authority; digitalSignature for a service.
    extension('2.5.29.15', true, o.ca ? tlv(0x03, Buffer.from([1, 0x06])) : tlv(0x03, Buffer.from([7, 0x80]))),
    extension('2.5.29.14', false, tlv(0x04, keyId(o.publicKey))),
    extension('2.5.29.35', false, seq(tlv(0x80, keyId(o.issuerPublicKey)))),
    ...(o.ca ? [] : [extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'), oid('1.3.6.1.5.5.7.3.2')))]),
    ...(sans.length ? [extension('2.5.29.17', false, seq(...sans))] : []),
  ];
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, serial),
    ECDSA_SHA256,
    name(o.issuer),
    seq(utcTime(new Date(now - 3600_000)), utcTime(new Date(now + VALID_DAYS * 86400_000))),
    name(o.subject),
    o.publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...extensions)),
  );
  const signature = sign('sha256', tbs, o.issuerKey);
  const der = seq(tbs, ECDSA_SHA256, tlv(0x03, Buffer.from([0]), signature));
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
}

/** @param {string} address */
function ipv6Bytes(address) {
  const [head = '', tail = ''] = address.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = address.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return Buffer.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

const newKeyPair = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' });

/** @param {string} file @param {string} content @param {number} mode */
function writeAtomically(file, content, mode) {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, content, { mode });
  fs.renameSync(tmp, file);
}

/**
 * @typedef {object} GrpcCertificates
 * @property {string} dir
 * @property {string} ca Path of the authority's certificate (GRPC_TLS_CA).
 * @property {(peer: string) => { GRPC_TLS_CA: string, GRPC_TLS_CERT: string, GRPC_TLS_KEY: string }} envFor
 *   The settings of one service.
 */

/**
 * Runs `fn` holding an exclusive lock file in `dir`, so concurrent launchers (parallel test
 * files) do not write one certificate each. A lock older than 30 s is taken over (its holder died).
 * @template T @param {string} dir @param {() => T} fn @returns {T}
 */
function withLock(dir, fn) {
  const lock = path.join(dir, '.lock');
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      fs.closeSync(fs.openSync(lock, 'wx'));
      break;
    } catch (e) {
      if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'EEXIST') throw e;
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 30_000) fs.rmSync(lock, { force: true });
      else if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

/** @param {string} crt @param {string} key @param {X509Certificate} caCert */
function isUsable(crt, key, caCert) {
  if (!fs.existsSync(crt) || !fs.existsSync(key)) return false;
  const cert = new X509Certificate(fs.readFileSync(crt));
  const publicOfKey = createPublicKey(createPrivateKey(fs.readFileSync(key)));
  return cert.verify(caCert.publicKey) && cert.publicKey.export({ type: 'spki', format: 'der' }).equals(publicOfKey.export({ type: 'spki', format: 'der' }));
}

/**
 * Makes sure `dir` holds the authority (`ca.crt`, `ca.key`) and a certificate and key per peer
 * (`<peer>.crt`, `<peer>.key`), creating what is missing or does not match; usable files are
 * kept, so every launch of one installation shares one authority. Each certificate names its
 * service (subject CN) and is valid for localhost, 127.0.0.1, ::1 and the service name as a
 * host (docker-compose).
 * @param {string} dir
 * @param {string[]} [peers]
 * @returns {GrpcCertificates}
 */
export function ensureGrpcCertificates(dir, peers = GRPC_PEERS) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const caCrt = path.join(dir, 'ca.crt');
  const caKeyFile = path.join(dir, 'ca.key');
  withLock(dir, () => {
    if (!fs.existsSync(caCrt) || !fs.existsSync(caKeyFile)) {
      const { publicKey, privateKey } = newKeyPair();
      const subject = 'billing-platform internal CA';
      writeAtomically(caKeyFile, /** @type {string} */ (privateKey.export({ type: 'pkcs8', format: 'pem' })), 0o600);
      writeAtomically(caCrt, issueCertificate({ subject, publicKey, issuer: subject, issuerKey: privateKey, issuerPublicKey: publicKey, ca: true }), 0o644);
    }
    const caKey = createPrivateKey(fs.readFileSync(caKeyFile));
    const caCert = new X509Certificate(fs.readFileSync(caCrt));
    for (const peer of peers) {
      const crt = path.join(dir, `${peer}.crt`);
      const key = path.join(dir, `${peer}.key`);
      if (isUsable(crt, key, caCert)) continue;
      const pair = newKeyPair();
      const pem = issueCertificate({ subject: peer, publicKey: pair.publicKey, issuer: 'billing-platform internal CA', issuerKey: caKey, issuerPublicKey: caCert.publicKey, ca: false, altNames: [peer, 'localhost', '127.0.0.1', '::1'] });
      writeAtomically(key, /** @type {string} */ (pair.privateKey.export({ type: 'pkcs8', format: 'pem' })), 0o600);
      writeAtomically(crt, pem, 0o644);
    }
  });
  return {
    dir,
    ca: caCrt,
    envFor: (peer) => ({ GRPC_TLS_CA: caCrt, GRPC_TLS_CERT: path.join(dir, `${peer}.crt`), GRPC_TLS_KEY: path.join(dir, `${peer}.key`) }),
  };
}
