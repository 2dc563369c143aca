export * from './config.js';
export * from './logger.js';
export * from './lifecycle.js';
export * from './grpc.js';
export * from './database.js';
export * from './nats.js';
export * from './secrets.js';
export * from './outbox.js';
