import type { MikroORM } from '@mikro-orm/postgresql';

/** A node of `explain (format json)`. */
interface PlanNode {
  'Node Type': string;
  Filter?: string;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/**
 * The sorts and filtered scans in the plan of a list page's query (`sql`, built with the ORM's
 * query builder as the list builds it), each as its node type and filter: with scans of the whole
 * table and bitmap scans (which come unordered) ruled out, what is left is an index scan, which
 * needs neither a sort nor a filter when an index holds the list's filter and order. Empty then;
 * without such an index every page reads every row of the merchant.
 */
export async function sortsAndFilters(orm: MikroORM, sql: string): Promise<string[]> {
  return orm.em.fork().transactional(async (em) => {
    await em.execute('set local enable_seqscan = off');
    await em.execute('set local enable_bitmapscan = off');
    const [{ 'QUERY PLAN': [explained] }] = await em.execute<{ 'QUERY PLAN': { Plan: PlanNode }[] }[]>(`explain (format json) ${sql}`);
    return nodes(explained!.Plan)
      .filter((n) => n['Node Type'].includes('Sort') || n.Filter)
      .map((n) => n['Node Type'] + (n.Filter ? ` (${n.Filter})` : ''));
  });
}
