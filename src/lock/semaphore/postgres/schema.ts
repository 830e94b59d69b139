import { advisoryKey } from '../../postgres/keys.js'
import type { PostgresSettings } from '../../postgres/options.js'
import { boundedBackendCall } from '../../backend-calls.js'

/**
 * The semaphore's tables and its acquire function, created on first use in the backend's
 * schema (one advisory lock serialises the DDL of processes starting at once):
 * - `semaphore_permits(namespace, name, owner, count, first_token, expires_at)`: one row per
 *   holder, its `count` permits with tokens `first_token ..`, live until `expires_at`;
 * - `semaphore_line(namespace, name, owner, arrived, beat_until)`: the FIFO line of waiters,
 *   each dropped once `beat_until` passed without another attempt;
 * - `semaphore_fences(namespace, name, token)`: the last token issued, `GREATEST(last + count,
 *   clock µs + count − 1)`, so tokens never repeat while the server clock moves forward;
 * - `semaphore_acquire(...)`: one attempt, under a transaction-scoped advisory lock on the
 *   semaphore so attempts on one semaphore run one at a time. Every instant is the server's
 *   `clock_timestamp()`.
 */
export interface SemaphoreTables {
  readonly permits: string
  readonly line: string
  readonly acquire: string
  /** The NOTIFY channel of every semaphore of this schema; the payload names the semaphore. */
  readonly channel: string
  ensure(): Promise<void>
}

// Long only because it holds the DDL text (one statement list, read top to bottom).
export function semaphoreTables(settings: PostgresSettings): SemaphoreTables {
  const schema = `"${settings.schema}"`
  const permits = `${schema}.semaphore_permits`
  const line = `${schema}.semaphore_line`
  const fences = `${schema}.semaphore_fences`
  const acquire = `${schema}.semaphore_acquire`
  const ddlLock = advisoryKey('hash64', 'stampede-guard', `ddl:${settings.schema}`)
  const ddl = `
BEGIN;
SELECT pg_advisory_xact_lock(${ddlLock.literal});
CREATE SCHEMA IF NOT EXISTS ${schema};
CREATE TABLE IF NOT EXISTS ${permits} (namespace text NOT NULL, name text NOT NULL, owner text NOT NULL,
  count integer NOT NULL, first_token bigint NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (namespace, name, owner));
CREATE TABLE IF NOT EXISTS ${line} (namespace text NOT NULL, name text NOT NULL, owner text NOT NULL,
  arrived timestamptz NOT NULL, beat_until timestamptz NOT NULL, PRIMARY KEY (namespace, name, owner));
CREATE TABLE IF NOT EXISTS ${fences} (namespace text NOT NULL, name text NOT NULL, token bigint NOT NULL,
  PRIMARY KEY (namespace, name));
CREATE OR REPLACE FUNCTION ${acquire}(p_ns text, p_name text, p_owner text, p_count integer, p_permits integer,
  p_lease_ms bigint, p_beat_ms bigint, p_channel text) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_first bigint;
  v_used bigint;
  v_head text;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_ns || chr(1) || p_name, 2023));
  -- The same attempt twice (a retry after its reply was lost) answers the same.
  SELECT first_token INTO v_first FROM ${permits}
   WHERE namespace = p_ns AND name = p_name AND owner = p_owner AND expires_at > v_now;
  IF FOUND THEN RETURN v_first; END IF;
  DELETE FROM ${permits} WHERE namespace = p_ns AND name = p_name AND expires_at <= v_now;
  DELETE FROM ${line} WHERE namespace = p_ns AND name = p_name AND beat_until <= v_now;
  SELECT coalesce(sum(count), 0) INTO v_used FROM ${permits} WHERE namespace = p_ns AND name = p_name;
  SELECT owner INTO v_head FROM ${line} WHERE namespace = p_ns AND name = p_name ORDER BY arrived, owner LIMIT 1;
  IF (v_head IS NULL OR v_head = p_owner) AND v_used + p_count <= p_permits THEN
    INSERT INTO ${fences} AS f (namespace, name, token)
      VALUES (p_ns, p_name, (extract(epoch FROM v_now) * 1000000)::bigint + p_count - 1)
      ON CONFLICT (namespace, name) DO UPDATE SET token = GREATEST(f.token + p_count, EXCLUDED.token)
      RETURNING token - p_count + 1 INTO v_first;
    INSERT INTO ${permits} VALUES (p_ns, p_name, p_owner, p_count, v_first, v_now + p_lease_ms * interval '1 millisecond');
    DELETE FROM ${line} WHERE namespace = p_ns AND name = p_name AND owner = p_owner;
    -- Permits left over: the next in line may fit (sent at COMMIT).
    IF v_used + p_count < p_permits AND EXISTS (SELECT 1 FROM ${line} WHERE namespace = p_ns AND name = p_name) THEN
      PERFORM pg_notify(p_channel, p_ns || chr(1) || p_name);
    END IF;
    RETURN v_first;
  END IF;
  IF p_beat_ms > 0 THEN
    INSERT INTO ${line} VALUES (p_ns, p_name, p_owner, v_now, v_now + p_beat_ms * interval '1 millisecond')
      ON CONFLICT (namespace, name, owner) DO UPDATE SET beat_until = EXCLUDED.beat_until;
  END IF;
  RETURN NULL;
END
$fn$;
COMMIT;`
  let ready: Promise<void> | undefined
  return {
    permits,
    line,
    acquire,
    channel: `sg_semaphore_${settings.schema}`.slice(0, 63),
    ensure() {
      ready ??= boundedBackendCall(
        'postgres',
        `creating the semaphore tables in schema ${schema}`,
        settings.pool.query(ddl),
        settings.timeoutMs,
      ).then(
        () => {},
        (err) => {
          ready = undefined
          throw err
        },
      )
      return ready
    },
  }
}
