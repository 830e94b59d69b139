import { createHash } from 'node:crypto'

/** MySQL refuses longer GET_LOCK names (ER_USER_LOCK_WRONG_NAME); MariaDB allows them, we keep to the common limit. */
export const MAX_LOCK_NAME = 64

/**
 * The GET_LOCK name of a key: `<namespace>:<key>` when that is at most 64 ASCII
 * characters, readable in `performance_schema.metadata_locks` / `information_schema.
 * METADATA_LOCK_INFO`; otherwise `#` + 63 hex characters of SHA-256(namespace NUL key).
 * Namespaces never start with `#`, so a hashed name never equals a plain one. Two keys
 * share a hashed name with odds of about n² / 2^253: never in practice.
 *
 * Plain names are compared as the server compares them: on a server where GET_LOCK names
 * are case-insensitive, `Coupon` and `coupon` share one lock (needless waiting, never two
 * holders of one key). MariaDB 10.11 compares them case-sensitively.
 */
export function lockName(namespace: string, key: string): string {
  const plain = `${namespace}:${key}`
  if (plain.length <= MAX_LOCK_NAME && /^[\x20-\x7e]*$/.test(plain)) return plain
  return `#${createHash('sha256')
    .update(`${namespace}\u0000${key}`, 'utf8')
    .digest('hex')
    .slice(0, MAX_LOCK_NAME - 1)}`
}

/** The fencing counter's row key: SHA-256 of namespace NUL key (a key may be longer than any index allows). */
export function counterKey(namespace: string, key: string): Buffer {
  return createHash('sha256').update(`${namespace}\u0000${key}`, 'utf8').digest()
}
