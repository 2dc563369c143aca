export * from './tracing.js';
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
