export * from './errors.js';
export * from './validation.js';
export * from './common.js';
export * from './event-types.js';
export * from './merchants.js';
export * from './merchant-users.js';
export * from './api-keys.js';
export * from './tokens.js';
