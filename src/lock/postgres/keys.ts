import { createHash } from 'node:crypto'

/**
 * How a text key becomes a PostgreSQL advisory-lock key.
 * - `'hash64'` (default): one bigint, the first 8 bytes of SHA-256(namespace NUL key).
 *   With n keys locked at the same moment, the chance that any two share a lock is about
 *   n² / 2^65 (a million live keys: 3 in 100 million).
 * - `'int4pair'`: two int4, (hash32(namespace), hash32(key)). `pg_locks` then shows the
 *   namespace in `classid` and the key in `objid`, which helps operators, but within one
 *   namespace the odds are n² / 2^33 (1,000 live keys: 1 in 10,000; 10,000: about 1 %).
 *
 * A collision never lets two holders into one key: two different keys share one lock, so
 * one waits for the other needlessly. Fencing tokens are counted per text key, so they are
 * unaffected. The two forms never collide with each other (PostgreSQL tells them apart by
 * `objsubid`), and the namespace keeps two applications on one database apart.
 */
export type PostgresKeyMapping = 'hash64' | 'int4pair'

/** One advisory key, as the argument list of a `pg_advisory_*` call. */
export interface AdvisoryKey {
  /**
   * e.g. `-4096512312123::bigint` or `17::int4, -3::int4`: numbers we computed, so they are
   * inlined and the lock statements can share one round trip with BEGIN and SET LOCAL.
   */
  readonly literal: string
  /** The `pg_locks` columns that identify this lock, for checks on the session. */
  readonly locksFilter: { classid: number; objid: number; objsubid: 1 | 2 }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest()
}

export function advisoryKey(mapping: PostgresKeyMapping, namespace: string, key: string): AdvisoryKey {
  if (mapping === 'int4pair') {
    const classid = digest(namespace).readInt32BE(0)
    const objid = digest(key).readInt32BE(0)
    return {
      literal: `${classid}::int4, ${objid}::int4`,
      // pg_locks shows oids as unsigned 32-bit numbers
      locksFilter: { classid: classid >>> 0, objid: objid >>> 0, objsubid: 2 },
    }
  }
  const bytes = digest(`${namespace}\u0000${key}`)
  return {
    literal: `(${bytes.readBigInt64BE(0)})::bigint`,
    // a bigint key is shown as its high 32 bits in classid and its low 32 bits in objid
    locksFilter: { classid: bytes.readUInt32BE(0), objid: bytes.readUInt32BE(4), objsubid: 1 },
  }
}
