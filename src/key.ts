import { InvalidArgumentError } from './errors.js'

/**
 * Checks a cache key. Besides being a non-empty string within `maxKeyLength`, it must be
 * well-formed UTF-16: Redis keys and channels are bytes, and a lone surrogate has no UTF-8
 * form, so ioredis writes it as U+FFFD. `'z\uD800'` and `'z\uD801'` would then share one
 * Redis entry (one key reading the other's value) and a delete broadcast would name a key
 * no other process holds. Rejecting is cheaper and clearer than hashing such keys: no
 * real key needs a lone surrogate, and one usually means a string was cut mid-character.
 */
export function checkKey(key: unknown, maxKeyLength: number): asserts key is string {
  if (typeof key !== 'string' || key.length === 0)
    throw new InvalidArgumentError(
      'key',
      `must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`,
    )
  if (key.length > maxKeyLength)
    throw new InvalidArgumentError(
      'key',
      `is ${key.length} characters long; the maximum is ${maxKeyLength} (maxKeyLength)`,
    )
  if (!(key as WellFormed).isWellFormed()) {
    throw new InvalidArgumentError(
      'key',
      `is not well-formed UTF-16 (a lone surrogate at index ${loneSurrogateAt(key)}): it would collide with other keys in Redis`,
    )
  }
}

/** `String.prototype.isWellFormed` (Node 20; not in the ES2022 lib this project targets). */
type WellFormed = string & { isWellFormed(): boolean }

function loneSurrogateAt(key: string): number {
  for (let i = 0; i < key.length; i++) {
    const unit = key.charCodeAt(i)
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < key.length && (key.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i++
    else if (unit >= 0xd800 && unit <= 0xdfff) return i
  }
  return -1
}
