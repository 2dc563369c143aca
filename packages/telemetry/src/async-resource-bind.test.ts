import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import { once } from 'node:events';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { installLeanAsyncResourceBind } from './async-resource-bind.js';

describe('installLeanAsyncResourceBind', () => {
  installLeanAsyncResourceBind();
  const als = new AsyncLocalStorage<string>();

  it('binds without the deprecated asyncResource accessor, keeping length, this, arguments and result', () => {
    const resource = new AsyncResource('Test');
    const fn = function (this: unknown, a: number, b: number) {
      return { self: this, sum: a + b };
    };
    const bound = resource.bind(fn);
    expect(Object.getOwnPropertyDescriptor(bound, 'asyncResource')).toBeUndefined();
    expect(bound.length).toBe(2);
    const receiver = { name: 'receiver' };
    expect(bound.call(receiver, 2, 3)).toEqual({ self: receiver, sum: 5 });
    const fixed = { name: 'fixed' };
    expect(resource.bind(fn, fixed).call(receiver, 1, 1)).toEqual({ self: fixed, sum: 2 });
    expect(AsyncResource.bind(fn).length).toBe(2);
  });

  it('runs the bound function in the async scope it was bound in', () => {
    const bound = als.run('at bind', () => new AsyncResource('Test').bind(() => als.getStore()));
    expect(als.run('at call', () => bound())).toBe('at bind');
  });

  it('still refuses what is not a function as Node does', () => {
    expect(() => new AsyncResource('Test').bind('nope' as unknown as () => void)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  });

  it('leaves http2 requests made before their session connected working, each in its caller context', async () => {
    const server = http2.createServer((req, res) => res.end(req.url));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    // Requested at once: each waits for the connection in the function http2 bound.
    const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const ask = (path: string) =>
      als.run(path, () => {
        const stream = session.request({ ':path': path });
        stream.end();
        return new Promise<{ body: string; store: string | undefined }>((resolve, reject) => {
          let body = '';
          let store: string | undefined;
          stream.on('response', () => (store = als.getStore()));
          stream.setEncoding('utf8');
          stream.on('data', (chunk: string) => (body += chunk));
          stream.on('end', () => resolve({ body, store }));
          stream.on('error', reject);
        });
      });
    try {
      expect(await Promise.all([ask('/a'), ask('/b')])).toEqual([
        { body: '/a', store: '/a' },
        { body: '/b', store: '/b' },
      ]);
    } finally {
      session.close();
      server.close();
    }
  });
});
