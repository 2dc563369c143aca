import type { MikroORM } from '@mikro-orm/postgresql';

/** The part of a node-postgres client the probe uses. */
interface PgClient {
  query(text: string): Promise<{ rows: Record<string, unknown>[] }>;
  escapeLiteral(text: string): string;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

/**
 * The tables the generic plan of `sql` reads by a sequential scan: the plan a connection keeps
 * for a named (prepared) statement, which knows the tables' statistics but not the parameters.
 * `params` are the parameters' text forms (JSON for `jsonb`, `{a,b}` for arrays). Nothing is
 * executed (EXPLAIN without ANALYZE). Run `analyze` on the tables first.
 */
export async function sequentialScansOfGenericPlan(orm: MikroORM, schema: string, sql: string, params: readonly (string | number)[]): Promise<string[]> {
  const knex = orm.em.getConnection().getKnex().client as { acquireConnection(): Promise<PgClient>; releaseConnection(c: PgClient): Promise<void> };
  const conn = await knex.acquireConnection();
  try {
    await conn.query('begin');
    await conn.query(`set local search_path = "${schema}"`);
    await conn.query('set local plan_cache_mode = force_generic_plan');
    await conn.query(`prepare generic_plan_probe as ${sql}`);
    const args = params.map((p) => (typeof p === 'number' ? String(p) : conn.escapeLiteral(p))).join(', ');
    const { rows } = await conn.query(`explain (format json) execute generic_plan_probe${args ? `(${args})` : ''}`);
    const scans: string[] = [];
    const walk = (n: PlanNode) => {
      if (n['Node Type'] === 'Seq Scan' && n['Relation Name']) scans.push(n['Relation Name']);
      n.Plans?.forEach(walk);
    };
    walk((rows[0]!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
    return scans;
  } finally {
    await conn.query('rollback').catch(() => undefined);
    await conn.query('deallocate generic_plan_probe').catch(() => undefined);
    await knex.releaseConnection(conn);
  }
}
