// The services of the platform, as the launchers (npm start, the test harness, bench) run them.
// Adding a service or an environment variable is one entry or one line here.

/**
 * @typedef {object} ServiceSpec
 * @property {string} name Directory under services/; runs from services/<name>/dist/main.js.
 * @property {'grpc' | 'http'} protocol
 * @property {number} defaultPort The port the service uses when nothing is configured.
 * @property {Record<string, string>} listen Env vars telling the service where to listen;
 *   `{host}` and `{port}` are filled in.
 * @property {string} [healthPath] HTTP services: path answering 200 when ready. Without it an
 *   HTTP service is ready when its port accepts connections. gRPC services are checked with
 *   grpc.health.v1.Health/Check.
 * @property {Record<string, string>} [connectsTo] Env var → service whose address it receives
 *   (`127.0.0.1:<port>` for gRPC, `http://127.0.0.1:<port>` for HTTP). Only set when that service
 *   runs; a service is started after the ones it connects to.
 * @property {(ctx: LaunchContext) => Record<string, string | undefined>} [env] Further env vars.
 * @property {boolean} [migrations] False for a service without a database (no `main.js migrate`).
 */

/**
 * @typedef {object} LaunchContext
 * @property {string} adminToken
 * @property {'development' | 'test' | 'production'} mode
 * @property {(name: string) => string | undefined} addressOf Where a service of this launch
 *   listens (as in `connectsTo`); undefined when it is not started. For addresses a service
 *   only hands out (links), which need no start order.
 */

/**
 * The abuse limits beyond the interface contract's (which are per credential, per client IP on
 * anonymous endpoints, and the per-email sign-in lockouts): off outside production mode. Test and
 * benchmark runs (mode `test`) send everything from one address, and sign in and hash passwords
 * far faster than a person would; so do an integrator's test suite and a developer's scripts
 * against `npm start` (mode `development`), which the contract's defaults allow (100 requests a
 * second per client IP on anonymous endpoints, 401 for every refused credential, a reset link for
 * every forgot-password). A production-mode service (the default of a service started on its
 * own, the Docker image, docker-compose) keeps its secure defaults. Tests of the limits
 * themselves set them again through `serviceEnv`, which is applied after these.
 */
const ABUSE_LIMITS_OFF = {
  identity: { PASSWORD_HASH_MAX_CONCURRENT: '0', FORGOT_PASSWORD_PER_EMAIL_PER_HOUR: '0' },
  gateway: { RATE_LIMIT_IP_PER_SECOND: '0', AUTH_FAILURE_LIMIT_PER_MINUTE: '0', PASSWORD_LIMIT_IP_PER_MINUTE: '0', PASSWORD_LIMIT_ACCOUNT_PER_MINUTE: '0', HTTP_MAX_CONNECTIONS_PER_IP: '0' },
};

/** In start order where there are no dependencies. @type {ServiceSpec[]} */
export const SERVICES = [
  {
    name: 'sandbox-provider',
    protocol: 'http',
    defaultPort: 8090,
    listen: { SANDBOX_PROVIDER_HOST: '{host}', SANDBOX_PROVIDER_PORT: '{port}' },
    healthPath: '/health',
    migrations: false,
  },
  {
    name: 'identity',
    protocol: 'grpc',
    defaultPort: 50051,
    listen: { IDENTITY_GRPC_ADDRESS: '{host}:{port}' },
    env: (ctx) => ({ PUBLIC_BASE_URL: ctx.addressOf('gateway'), ...(ctx.mode !== 'production' ? ABUSE_LIMITS_OFF.identity : {}) }),
  },
  {
    name: 'billing',
    protocol: 'grpc',
    defaultPort: 50052,
    listen: { BILLING_GRPC_ADDRESS: '{host}:{port}' },
    connectsTo: { PAYMENT_PROVIDER_URL: 'sandbox-provider' },
  },
  {
    name: 'checkout',
    protocol: 'grpc',
    defaultPort: 50053,
    listen: { CHECKOUT_GRPC_ADDRESS: '{host}:{port}' },
    connectsTo: { IDENTITY_GRPC_URL: 'identity', BILLING_GRPC_URL: 'billing' },
    env: (ctx) => ({ PUBLIC_BASE_URL: ctx.addressOf('gateway') }),
  },
  {
    name: 'webhooks',
    protocol: 'grpc',
    defaultPort: 50054,
    listen: { WEBHOOKS_GRPC_ADDRESS: '{host}:{port}' },
    connectsTo: { IDENTITY_GRPC_URL: 'identity' },
  },
  {
    name: 'gateway',
    protocol: 'http',
    defaultPort: 8080,
    listen: { HOST: '{host}', PORT: '{port}' },
    healthPath: '/health',
    connectsTo: {
      IDENTITY_GRPC_URL: 'identity',
      BILLING_GRPC_URL: 'billing',
      CHECKOUT_GRPC_URL: 'checkout',
      WEBHOOKS_GRPC_URL: 'webhooks',
    },
    env: (ctx) => ({ BILLING_ADMIN_TOKEN: ctx.adminToken, PUBLIC_BASE_URL: ctx.addressOf('gateway'), ...(ctx.mode !== 'production' ? ABUSE_LIMITS_OFF.gateway : {}) }),
  },
];

/**
 * Fills `{host}` and `{port}` in a listen template.
 * @param {string} template
 * @param {{ host: string, port: number }} values
 */
export function fillTemplate(template, values) {
  return template.replaceAll('{host}', values.host).replaceAll('{port}', String(values.port));
}

/**
 * The port in `value` when it has the template's shape (`0.0.0.0:50051` for `{host}:{port}`).
 * @param {string} template
 * @param {string | undefined} value
 * @returns {number | undefined}
 */
export function portFromTemplate(template, value) {
  if (!value || !template.includes('{port}')) return undefined;
  const pattern = template
    .split(/(\{host\}|\{port\})/)
    .map((part) => (part === '{host}' ? '.*' : part === '{port}' ? '(\\d+)' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  const m = new RegExp(`^${pattern}$`).exec(value);
  return m ? Number(m[1]) : undefined;
}
