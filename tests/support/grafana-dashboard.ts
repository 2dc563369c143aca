import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The PromQL queries of the provisioned Grafana dashboard (`deploy/grafana/dashboards/`) and
 * the metric names and labels they use, so tests can check them against what the services
 * export: a query naming a metric nobody exports draws an empty panel without any error.
 */
const root = resolve(import.meta.dirname, '../..');
export const DASHBOARD_PATH = 'deploy/grafana/dashboards/billing-platform.json';

export interface DashboardQuery {
  panel: string;
  expr: string;
}

export function dashboardQueries(): DashboardQuery[] {
  const dashboard = JSON.parse(readFileSync(join(root, DASHBOARD_PATH), 'utf8')) as { panels: { title: string; targets?: { expr?: string }[] }[] };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).flatMap((t) => (t.expr ? [{ panel: p.title, expr: t.expr }] : [])));
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'offset', 'bool', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan']);

/** The metric names a PromQL expression selects (identifiers that are not functions, keywords or labels). */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = [...bare.matchAll(/(?<![\w.])([A-Za-z_:][\w:]*)\s*(\()?/g)].filter((m) => !m[2] && !KEYWORDS.has(m[1]!.toLowerCase())).map((m) => m[1]!);
  return [...new Set(names)];
}

/** Labels an expression groups by (`by (…)`) or matches on (`{label="…"}`). */
export function labelNames(expr: string): string[] {
  const noStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const grouped = [...noStrings.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((l) => l.trim()));
  const matched = [...noStrings.matchAll(/\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1]!));
  return [...new Set([...grouped, ...matched].filter(Boolean))];
}

/** Labels Prometheus itself attaches or computes: the scrape job and instance, a bucket's bound. */
export const SCRAPE_LABELS = new Set(['job', 'instance', 'le']);

/** Sample name → the label names seen on its samples, from Prometheus text-format scrapes. */
export function samplesOf(scrapes: string[]): Map<string, Set<string>> {
  const samples = new Map<string, Set<string>>();
  for (const text of scrapes) {
    for (const line of text.split('\n')) {
      const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s/.exec(line);
      if (!m) continue;
      const labels = samples.get(m[1]!) ?? new Set<string>();
      for (const l of (m[2] ?? '').matchAll(/([A-Za-z_]\w*)="/g)) labels.add(l[1]!);
      samples.set(m[1]!, labels);
    }
  }
  return samples;
}
