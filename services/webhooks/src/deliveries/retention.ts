import type { MikroORM } from '@mikro-orm/postgresql';

const CHUNK = 10_000;

/**
 * Deletes finished (Succeeded or Failed) deliveries created more than `days` ago, with their attempts,
 * and events older than that with no delivery left. Older events are long gone from the stream
 * (7 days), so forgetting their ids cannot let a redelivery through.
 */
export async function pruneFinished(orm: MikroORM, days: number): Promise<{ deliveries: number; events: number }> {
  const conn = orm.em.fork().getConnection();
  const run = async (sql: string) => {
    let total = 0;
    for (;;) {
      const res = await conn.execute<{ affectedRows: number }>(sql, [days], 'run');
      total += res.affectedRows;
      if (res.affectedRows < CHUNK) return total;
    }
  };
  const deliveries = await run(
    `delete from "deliveries" where "id" in (select "id" from "deliveries" where "created_at" < now() - ? * interval '1 day' and "status" <> 'Pending' limit ${CHUNK})`,
  );
  const events = await run(
    `delete from "events" where "id" in (select e."id" from "events" e where e."received_at" < now() - ? * interval '1 day'
       and not exists (select 1 from "deliveries" d where d."event_id" = e."id") limit ${CHUNK})`,
  );
  return { deliveries, events };
}
