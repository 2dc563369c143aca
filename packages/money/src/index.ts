export * from './currency.js';
export * from './money.js';
export * from './rounding.js';
