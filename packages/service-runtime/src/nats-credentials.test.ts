import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { NatsConfig, natsCredentialsProblem } from './config.js';
import { natsServerOptions } from './nats.js';

// Production services used to connect to NATS without credentials: anyone who reached it could
// read every event and forge ones webhooks signed and delivered.
const password = randomBytes(32).toString('hex');
const problemOf = (env: Record<string, string>) => natsCredentialsProblem(NatsConfig.parse(env));

describe('natsServerOptions', () => {
  it('takes user and password out of the URL, percent-decoded, for every server', () => {
    expect(natsServerOptions(`nats://platform:${encodeURIComponent('p@ss/w:rd')}@a:4222,nats://platform:${encodeURIComponent('p@ss/w:rd')}@b:4222`)).toEqual({
      servers: ['nats://a:4222', 'nats://b:4222'],
      user: 'platform',
      pass: 'p@ss/w:rd',
    });
  });

  it('reads a lone userinfo as a token, and a URL without one as no credentials', () => {
    expect(natsServerOptions('tls://s3cret@nats:4222')).toEqual({ servers: ['tls://nats:4222'], token: 's3cret' });
    expect(natsServerOptions('nats://127.0.0.1:4222, 127.0.0.1:4223')).toEqual({ servers: ['nats://127.0.0.1:4222', '127.0.0.1:4223'] });
  });

  it('refuses servers that name different credentials', () => {
    expect(() => natsServerOptions('nats://a:one@h1:4222,nats://a:two@h2:4222')).toThrow('different credentials');
  });
});

describe('production refuses an unauthenticated NATS connection', () => {
  it('refuses a NATS_URL without credentials, naming the way out', () => {
    expect(problemOf({})).toContain('NATS_URL has no credentials');
    expect(problemOf({ NATS_URL: 'nats://nats:4222' })).toContain('NATS_AUTH=none');
  });

  it('refuses a weak or short password or token, without printing it', () => {
    const weak = problemOf({ NATS_URL: 'nats://billing:password@nats:4222' });
    expect(weak).toMatch(/^NATS_URL's password /);
    expect(weak).not.toContain(':password@');
    expect(problemOf({ NATS_URL: `nats://${randomBytes(16).toString('hex')}@nats:4222` })).toContain("NATS_URL's token encodes 16 bytes");
  });

  it('accepts 32 random bytes as password or token', () => {
    expect(problemOf({ NATS_URL: `nats://billing:${password}@nats:4222` })).toBeUndefined();
    expect(problemOf({ NATS_URL: `nats://${encodeURIComponent(randomBytes(32).toString('base64'))}@nats:4222` })).toBeUndefined();
  });

  it('accepts no credentials when NATS_AUTH=none says the server is protected otherwise', () => {
    expect(problemOf({ NATS_URL: 'nats://nats:4222', NATS_AUTH: 'none' })).toBeUndefined();
  });

  it('reports a malformed NATS_URL as a configuration error in every mode', () => {
    expect(NatsConfig.safeParse({ NATS_URL: 'nats://a:one@h1:4222,nats://a:two@h2:4222' }).success).toBe(false);
    expect(NatsConfig.safeParse({ NATS_AUTH: 'maybe' }).success).toBe(false);
  });
});
