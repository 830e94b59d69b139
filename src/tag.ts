import { InvalidArgumentError } from './errors.js'
import { checkKey } from './key.js'

/** Longest accepted tag, in UTF-16 code units. */
export const MAX_TAG_LENGTH = 1024
/** Most distinct tags one entry carries: each costs one script at its commit (see docs/tags.md). */
export const MAX_TAGS_PER_ENTRY = 64

/**
 * Checks a list of tags and returns it without duplicates. A tag follows the key rules
 * (a non-empty, well-formed string; see checkKey) within MAX_TAG_LENGTH; at most
 * MAX_TAGS_PER_ENTRY of them, counting those already given (`before`).
 */
export function checkTags(tags: unknown, argument: string, before: readonly string[] = []): string[] {
  if (!Array.isArray(tags))
    throw new InvalidArgumentError(argument, `must be an array of strings, got ${tags === null ? 'null' : typeof tags}`)
  const unique = new Set(before)
  for (const tag of tags as unknown[]) {
    try {
      checkKey(tag, MAX_TAG_LENGTH)
    } catch (error) {
      throw new InvalidArgumentError(argument, (error as Error).message.replace(/^key: /, 'a tag '))
    }
    unique.add(tag)
  }
  if (unique.size > MAX_TAGS_PER_ENTRY)
    throw new InvalidArgumentError(argument, `an entry carries at most ${MAX_TAGS_PER_ENTRY} tags, got ${unique.size}`)
  return [...unique].slice(before.length)
}
