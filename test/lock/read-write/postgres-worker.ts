/**
 * A read-write lock user in its own process (test/lock/read-write/postgres.test.ts).
 * env PG_DATABASE. Requests:
 * - { op: 'read', name, wait } takes a read lock and holds it until the process dies;
 *   resolves with its token.
 * - { op: 'mix', name, rounds, writeEvery } runs `rounds` sections, every `writeEvery`-th a
 *   write, the others reads. Each section records itself in the table `rw_inside` (its own
 *   pool, autocommit, so other processes see it at once), counts who else is inside, and
 *   leaves; resolves with { sections, violations, maxReaders }.
 */
import pg from 'pg'
import { createLocks } from '../../../src/lock/index.js'
import { serveRequests } from '../../support/worker-side.js'

const config = { host: '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres' }
const lockPool = new pg.Pool({ ...config, database: process.env.PG_DATABASE, max: 4 })
const resourcePool = new pg.Pool({ ...config, database: process.env.PG_DATABASE, max: 2 })
const locks = createLocks({ postgres: lockPool, namespace: 'rw' })

type Request =
  { op: 'read'; name: string; wait: number } | { op: 'mix'; name: string; rounds: number; writeEvery: number }

async function section(kind: 'r' | 'w'): Promise<{ violation: boolean; readers: number }> {
  const { rows } = await resourcePool.query<{ id: number }>('INSERT INTO rw_inside (kind) VALUES ($1) RETURNING id', [
    kind,
  ])
  const counts = await resourcePool.query<{ w: string; r: string }>(
    "SELECT count(*) FILTER (WHERE kind = 'w') AS w, count(*) FILTER (WHERE kind = 'r') AS r FROM rw_inside",
  )
  const [writers, readers] = [Number(counts.rows[0]!.w), Number(counts.rows[0]!.r)]
  await resourcePool.query('SELECT pg_sleep(0.005)')
  await resourcePool.query('DELETE FROM rw_inside WHERE id = $1', [rows[0]!.id])
  return { violation: kind === 'w' ? writers + readers > 1 : writers > 0, readers }
}

serveRequests(async (request: Request) => {
  const rw = locks.readWrite(request.name)
  if (request.op === 'read') {
    const held = await rw.acquireRead({ wait: request.wait })
    return held.token.toString()
  }
  let violations = 0
  let maxReaders = 0
  for (let i = 0; i < request.rounds; i++) {
    const write = i % request.writeEvery === request.writeEvery - 1
    const seen = write
      ? await rw.write(() => section('w'), { wait: '60s' })
      : await rw.read(() => section('r'), { wait: '60s' })
    if (seen.violation) violations++
    maxReaders = Math.max(maxReaders, seen.readers)
  }
  return { sections: request.rounds, violations, maxReaders }
})
