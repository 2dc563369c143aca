// Baseline for write endpoints: bare fastify parsing a JSON body and running one INSERT into a
// scratch table (no auth, no idempotency, no gRPC) — the floor any HTTP → Postgres write can
// reach on this machine. Pool size as the services' default (DB_POOL_MAX 10).
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_MAX ?? 10) });
await pool.query('create table if not exists bench_scratch (id uuid primary key, member_id uuid not null, plan_id uuid not null, created_at timestamptz not null)');
const app = Fastify();
app.post('/scratch', async (req, reply) => {
  const id = randomUUID();
  await pool.query('insert into bench_scratch (id, member_id, plan_id, created_at) values ($1, $2, $3, now())', [id, req.body.memberId, req.body.planId]);
  return reply.code(201).header('location', `/scratch/${id}`).send({ id, ...req.body });
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`PORT ${app.server.address().port}\n`);
process.on('SIGTERM', () => app.close().then(() => pool.end()).then(() => process.exit(0)));
