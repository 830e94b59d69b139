import { advisoryKey } from './keys.js'
import type { PgPoolLike, PostgresSettings } from './options.js'
import { boundedBackendCall } from '../backend-calls.js'

/**
 * The two small tables, created on first use in the configured schema:
 * - `lock_fences(namespace, key, token)`: one row per text key ever locked with fencing
 *   on. The token starts at the server clock in µs and then goes up by at least one
 *   (`GREATEST(token + 1, clock)`), so a row that was deleted, or an increment lost with
 *   a rolled-back transaction, never makes a token repeat while the server clock moves
 *   forward.
 * - `run_once(name, lock_until, locked_at, locked_by)`: ShedLock's table, one row per job.
 * - `rw_tokens`: a sequence, the read-write locks' fencing tokens. A row of `lock_fences`
 *   would not do for readers: its upsert holds the row lock until the reader's transaction
 *   ends, so readers would take turns. `nextval` takes no lock and is never rolled back;
 *   it starts at the server clock in µs, so a sequence dropped and created again does not
 *   repeat a token either.
 */
export interface PostgresTables {
  readonly fences: string
  readonly runOnce: string
  readonly rwTokens: string
  /** Creates the schema and tables once per backend (retried after a failure). */
  ensure(): Promise<void>
}

export function postgresTables(settings: PostgresSettings): PostgresTables {
  const schema = `"${settings.schema}"`
  const fences = `${schema}.lock_fences`
  const runOnce = `${schema}.run_once`
  const rwTokens = `${schema}.rw_tokens`
  let ready: Promise<void> | undefined
  return {
    fences,
    runOnce,
    rwTokens,
    ensure() {
      ready ??= createTables(settings.pool, settings, schema, fences, runOnce, rwTokens).catch((err) => {
        ready = undefined
        throw err
      })
      return ready
    },
  }
}

async function createTables(
  pool: PgPoolLike,
  settings: PostgresSettings,
  schema: string,
  fences: string,
  runOnce: string,
  rwTokens: string,
): Promise<void> {
  // CREATE ... IF NOT EXISTS races with itself (unique violation on the catalog) when
  // several processes start at once: one advisory lock serialises the DDL.
  const ddlLock = advisoryKey('hash64', 'stampede-guard', `ddl:${settings.schema}`)
  const ddl = [
    'BEGIN',
    `SELECT pg_advisory_xact_lock(${ddlLock.literal})`,
    `CREATE SCHEMA IF NOT EXISTS ${schema}`,
    `CREATE TABLE IF NOT EXISTS ${fences} (namespace text NOT NULL, key text NOT NULL, token bigint NOT NULL, PRIMARY KEY (namespace, key))`,
    `CREATE TABLE IF NOT EXISTS ${runOnce} (name text PRIMARY KEY, lock_until timestamptz NOT NULL, locked_at timestamptz NOT NULL, locked_by text NOT NULL)`,
    // START WITH takes a constant only, hence EXECUTE.
    `DO $$ BEGIN IF to_regclass('${rwTokens}') IS NULL THEN EXECUTE 'CREATE SEQUENCE ${rwTokens} START WITH ' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint; END IF; END $$`,
    'COMMIT',
  ].join(';\n')
  const client = await boundedBackendCall('postgres', 'connect', pool.connect(), settings.timeoutMs)
  let broken: Error | undefined
  const onError = (err?: Error) => (broken = err ?? new Error('connection ended'))
  client.on('error', onError)
  try {
    await boundedBackendCall(
      'postgres',
      `creating the tables in schema ${schema}`,
      client.query(ddl),
      settings.timeoutMs,
      () => (broken ??= new Error('timed out')),
    )
  } catch (err) {
    broken ??= err as Error
    throw err
  } finally {
    client.removeListener('error', onError)
    client.release(broken)
  }
}

/** The statement that issues the next fencing token for `($1 namespace, $2 key)`; it also returns the server session's pid. */
export function nextTokenSql(fences: string): string {
  return (
    `INSERT INTO ${fences} AS f (namespace, key, token) VALUES ($1, $2, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) ` +
    'ON CONFLICT (namespace, key) DO UPDATE SET token = GREATEST(f.token + 1, EXCLUDED.token) RETURNING token, pg_backend_pid() AS pid'
  )
}
