// What a process without a database or gRPC peers needs (the sandbox provider): config,
// logging, signals and the operations listener. Importing it loads neither MikroORM nor the
// gRPC client; the package's main entry point loads both (about 40 MB of RSS).
export * from './config.js';
export * from './logger.js';
export * from './lifecycle.js';
export * from './health.js';
