import type { TestProject } from 'vitest/node';
import { startTestPlatform } from '../support/platform.js';

/** Starts the one platform every e2e test file shares, and stops it after the run. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const platform = await startTestPlatform();
  if (!platform.gatewayUrl) {
    await platform.stop();
    throw new Error('the gateway is not built (services/gateway/dist/main.js); e2e tests need it');
  }
  project.provide('gatewayUrl', platform.gatewayUrl);
  project.provide('adminToken', platform.adminToken);
  project.provide('databaseUrl', platform.databaseUrl);
  project.provide('natsUrl', platform.natsUrl);
  project.provide('dataDir', platform.dataDir);
  project.provide('identityGrpcAddress', platform.processes.identity?.address ?? '');
  project.provide('grpcAddresses', Object.fromEntries(['identity', 'billing', 'checkout', 'webhooks'].map((name) => [name, platform.processes[name]?.address ?? ''])));
  project.provide('grpcCertsDir', platform.grpcCerts.dir);
  project.provide('sandboxProviderUrl', platform.processes['sandbox-provider']?.address ?? '');
  project.provide('metricsUrls', Object.fromEntries(Object.entries(platform.processes).map(([name, p]) => [name, p.metricsUrl ?? ''])));
  return () => platform.stop();
}
