import { LATEST_INSTANT, type PlanInterval } from '@billing/contracts';

/** How often a plan bills: every `intervalCount` × `interval`. */
export interface BillingSchedule {
  interval: PlanInterval;
  intervalCount: number;
}

const DAY_MS = 86_400_000;

/** Whether `d` can be stored: no later than `LATEST_INSTANT` (years 0001 to 9999, what the API accepts). */
export const storable = (d: Date): boolean => d.getTime() <= LATEST_INSTANT;

/**
 * The instant of a UTC calendar date and time. `Date.UTC` reads years 0 to 99 as 1900 to 1999;
 * `setUTCFullYear` takes the year as given.
 */
function utc(year: number, monthIndex: number, day: number, h = 0, m = 0, s = 0, ms = 0): Date {
  const d = new Date(Date.UTC(2000, 0, 1, h, m, s, ms));
  d.setUTCFullYear(year, monthIndex, day);
  return d;
}

function daysInMonth(year: number, monthIndex: number): number {
  return utc(year, monthIndex + 1, 0).getUTCDate();
}

/**
 * The end of a billing period that starts at `from`, in UTC. Weeks and fortnights are exact
 * multiples of 7 days. Months and years are calendar months keeping the day of month and time
 * of day of `anchor` (the first period's start), clamped to the month's last day, so periods
 * never drift: anchored on the 31st, the periods end on Feb 28 (or 29), Mar 31, Apr 30, ...
 */
export function periodEnd(from: Date, schedule: BillingSchedule, anchor: Date = from): Date {
  const { interval, intervalCount } = schedule;
  if (!Number.isInteger(intervalCount) || intervalCount < 1) throw new RangeError('intervalCount must be a positive integer.');
  switch (interval) {
    case 'Week':
      return new Date(from.getTime() + 7 * intervalCount * DAY_MS);
    case 'Fortnight':
      return new Date(from.getTime() + 14 * intervalCount * DAY_MS);
    case 'Month':
    case 'Year': {
      const months = intervalCount * (interval === 'Year' ? 12 : 1);
      const total = from.getUTCFullYear() * 12 + from.getUTCMonth() + months;
      const year = Math.floor(total / 12);
      const month = total % 12;
      const day = Math.min(anchor.getUTCDate(), daysInMonth(year, month));
      return utc(year, month, day, anchor.getUTCHours(), anchor.getUTCMinutes(), anchor.getUTCSeconds(), anchor.getUTCMilliseconds());
    }
  }
}

export function addDays(from: Date, days: number): Date {
  return new Date(from.getTime() + days * DAY_MS);
}

/** `addDays`, no later than `LATEST_INSTANT`: a retry date past the year 9999 is on its last instant. */
export function addDaysWithin(from: Date, days: number): Date {
  return new Date(Math.min(from.getTime() + days * DAY_MS, LATEST_INSTANT));
}
