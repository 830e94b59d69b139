import { randomBytes } from 'node:crypto'

/** This process's part of every owner id: 96 random bits, drawn once. */
const processPart = randomBytes(12).toString('hex')
let issued = 0

/**
 * A new lock owner id, for one lookup (the cache's lock value is `<owner>:<token>`): this
 * process's random part, then a counter in base 36. As unique across processes and lookups
 * as 128 random bits drawn for each lookup were, without asking the CSPRNG on every miss.
 * Never contains ':'. The random part has a fixed length, so one owner is never a prefix of
 * another followed by ':' (release-owner.lua matches `<owner>:`).
 * @internal
 */
export function newOwnerId(): string {
  issued += 1
  return processPart + issued.toString(36)
}
