import { defineConfig } from 'vitest/config';

const IGNORED = ['**/node_modules/**', '**/dist/**', '**/.data/**', '**/.turbo/**'];

export default defineConfig({
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['packages/**/src/**/*.test.ts', 'services/**/src/**/*.test.ts'],
          exclude: [...IGNORED, '**/*.int.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['**/src/**/*.int.test.ts'],
          exclude: IGNORED,
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          // The operators' deploy kit and cross-version compatibility: docker-compose.yml, buf lint/breaking.
          name: 'deploy',
          include: ['tests/deploy/**/*.test.ts'],
          exclude: IGNORED,
          testTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['tests/e2e/**/*.test.ts'],
          exclude: IGNORED,
          globalSetup: ['tests/e2e/global-setup.ts'],
          // One shared platform: files run one after another so they do not race on its state.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
