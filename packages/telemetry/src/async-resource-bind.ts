import { AsyncResource } from 'node:async_hooks';

type Bind = (this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) => (...args: unknown[]) => unknown;

/**
 * Node 20's `AsyncResource#bind` gives every function it binds an `asyncResource` accessor
 * (deprecated, DEP0172) whose getter and setter it wraps in `util.deprecate`. Node's own http2
 * client binds one function per request, so every outgoing gRPC call pays for building those
 * wrappers: in the writes benchmark's profiles `deprecate` alone was 1.8 % of the gateway's CPU
 * and 1.3 % of checkout's. This replaces `bind` with the same binding without the accessor: the
 * bound function runs `fn` in the resource's async scope exactly as Node's does, with the same
 * `this` rules and `length`. Nothing in the platform or its dependencies reads the accessor.
 * Does nothing on a Node whose `bind` no longer defines it. Idempotent.
 */
export function installLeanAsyncResourceBind(): void {
  const proto = AsyncResource.prototype as unknown as { bind: Bind; leanBind?: true };
  if (proto.leanBind) return;
  const probe = new AsyncResource('LeanBindProbe');
  const nodeBind = proto.bind;
  if (!Object.getOwnPropertyDescriptor(nodeBind.call(probe, () => undefined), 'asyncResource')) return;
  proto.bind = function bind(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) {
    // Node's validation and error for a non-function.
    if (typeof fn !== 'function') return nodeBind.call(this, fn, thisArg);
    const resource = this;
    const bound =
      thisArg === undefined
        ? function (this: unknown, ...args: unknown[]) {
            return resource.runInAsyncScope(fn, this, ...args);
          }
        : resource.runInAsyncScope.bind(resource, fn, thisArg);
    Object.defineProperty(bound, 'length', { configurable: true, enumerable: false, value: fn.length, writable: false });
    return bound;
  };
  proto.leanBind = true;
}
