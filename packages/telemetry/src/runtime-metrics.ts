import { constants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram } from 'node:perf_hooks';
import type { Meter } from '@opentelemetry/api';

/** GC pause bounds (seconds): a scavenge takes about a millisecond, a full mark-compact tens. */
const GC_BUCKETS_SECONDS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.1, 0.25];

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

let loopDelay: IntervalHistogram | undefined;
let gcObserver: PerformanceObserver | undefined;

/**
 * The process's own health (named with their Prometheus unit suffix: the exporter adds none), for telling a slow request from a stalled process:
 * - `process_resident_memory_bytes`;
 * - `nodejs_eventloop_delay_max_seconds` / `..._p99_seconds`: how late the event loop ran its
 *   timers since the previous scrape (sampled every 10 ms; each scrape starts a new window);
 * - `nodejs_gc_duration_seconds`: each garbage-collection pause, by kind (minor = scavenge,
 *   major = mark-compact), during which the process answers nothing.
 */
export function startRuntimeMetrics(meter: Meter): void {
  if (loopDelay) return;
  loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const delay = loopDelay;
  meter.createObservableGauge('process.resident.memory.bytes', { unit: 'By', description: 'Resident set size of the process.' }).addCallback((r) => r.observe(process.memoryUsage.rss()));
  const max = meter.createObservableGauge('nodejs.eventloop.delay.max.seconds', { unit: 's', description: 'Longest event-loop delay since the previous scrape.' });
  const p99 = meter.createObservableGauge('nodejs.eventloop.delay.p99.seconds', { unit: 's', description: '99th percentile event-loop delay since the previous scrape.' });
  meter.addBatchObservableCallback(
    (r) => {
      // The histogram counts from the first sample of the window, in nanoseconds.
      if (delay.count > 0) {
        r.observe(max, delay.max / 1e9);
        r.observe(p99, delay.percentile(99) / 1e9);
      }
      delay.reset();
    },
    [max, p99],
  );
  const gc = meter.createHistogram('nodejs.gc.duration.seconds', { unit: 's', description: 'Garbage-collection pauses, by kind.', advice: { explicitBucketBoundaries: GC_BUCKETS_SECONDS } });
  gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gc.record(e.duration / 1000, { kind: GC_KINDS[((e as { detail?: { kind?: number } }).detail)?.kind ?? 0] ?? 'other' });
  });
  gcObserver.observe({ entryTypes: ['gc'] });
}

export function stopRuntimeMetrics(): void {
  loopDelay?.disable();
  gcObserver?.disconnect();
  loopDelay = undefined;
  gcObserver = undefined;
}
