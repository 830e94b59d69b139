/**
 * Real PostgreSQL as the slow database (DATABASE_URL). The harness seeds a table of its
 * own once; each worker then queries it through its own small pool. Latency comes from
 * pg_sleep inside the same statement, so one load is one round trip and one query.
 */
import pg from 'pg'
import { ITEM_COUNT, type Item, type ItemSource } from './source.js'

/** Ours alone: created, truncated and re-seeded by every run, never anything else's. */
export const LOAD_TABLE = 'stampede_guard_load_items'

/** Run once, in the harness, before the workers start. */
export async function seedPostgres(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${LOAD_TABLE} (id integer PRIMARY KEY, name text NOT NULL, price_cents integer NOT NULL)`,
    )
    await client.query(`TRUNCATE ${LOAD_TABLE}`)
    await client.query(
      `INSERT INTO ${LOAD_TABLE} (id, name, price_cents) SELECT i, 'Item ' || i, 100 + (i * 7919) % 10000 FROM generate_series(1, $1::int) AS i`,
      [ITEM_COUNT],
    )
  } finally {
    await client.end()
  }
}

export class PostgresSource implements ItemSource {
  private readonly pool: pg.Pool

  constructor(
    url: string,
    private readonly latency: () => number,
    /** Per worker; 4 workers × 10 stays well under PostgreSQL's default max_connections (100). */
    poolSize = 10,
  ) {
    this.pool = new pg.Pool({ connectionString: url, max: poolSize })
    // An idle client's error (server restart) must not crash the worker; the next query reports it.
    this.pool.on('error', () => {})
  }

  async load(id: number): Promise<Item> {
    const seconds = this.latency() / 1000
    const { rows } = await this.pool.query<{ id: number; name: string; price_cents: number }>(
      seconds > 0
        ? `SELECT id, name, price_cents FROM ${LOAD_TABLE}, pg_sleep($2::float8) WHERE id = $1`
        : `SELECT id, name, price_cents FROM ${LOAD_TABLE} WHERE id = $1`,
      seconds > 0 ? [id, seconds] : [id],
    )
    const row = rows[0]
    if (!row) throw new Error(`item ${id} not found`)
    return { id: row.id, name: row.name, priceCents: row.price_cents, loadedAt: Date.now() }
  }

  async close(): Promise<void> {
    await this.pool.end()
  }
}
