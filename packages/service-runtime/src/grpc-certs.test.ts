import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { certificateSerial, ensureGrpcCertificates } from '../../../scripts/lib/grpc-certs.mjs';

// The launcher's certificate authority for the services' mutual TLS (scripts/lib/grpc-certs.mjs).

describe('certificate serial numbers', () => {
  it('are positive DER integers in minimal form whatever the random bytes: never a leading zero byte', () => {
    for (const fill of [0x00, 0x01, 0x3f, 0x40, 0x7f, 0x80, 0xff]) {
      const bytes = Buffer.alloc(16, fill);
      const serial = certificateSerial(bytes);
      expect(serial).toHaveLength(16);
      expect(serial[0]).toBeGreaterThanOrEqual(0x40);
      expect(serial[0]).toBeLessThanOrEqual(0x7f);
      expect(serial.subarray(1)).toEqual(bytes.subarray(1));
    }
  });

  it('give every issued certificate a serial OpenSSL reads back, starting within 0x40-0x7f', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bp-grpc-certs-'));
    try {
      const peers = Array.from({ length: 40 }, (_, i) => `peer${i}`);
      ensureGrpcCertificates(dir, peers);
      for (const name of ['ca', ...peers]) {
        const cert = new X509Certificate(readFileSync(join(dir, `${name}.crt`)));
        expect(cert.serialNumber).toMatch(/^[4-7][0-9A-F]{31}$/);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
