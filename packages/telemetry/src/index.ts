export * from './tracing.js';
export { installLeanAsyncResourceBind } from './async-resource-bind.js';
export * from './messaging.js';
export {
  DURATION_BUCKETS_SECONDS,
  meter,
  observeGauge,
  recordBillingRun,
  recordCharge,
  recordHttpRequest,
  recordIdempotencyReplay,
  recordRateLimitRejection,
  recordRpcCall,
  recordWebhookAttempt,
  serveMetrics,
} from './metrics.js';
