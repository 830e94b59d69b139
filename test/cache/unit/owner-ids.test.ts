/**
 * The cache's lock owner ids (src/cache/owner-ids.ts): one per lookup, none repeated, none
 * containing ':' (the lock value is `<owner>:<token>`), and none a prefix of another
 * (release-owner.lua releases the lock whose value starts with `<owner>:`).
 */
import { describe, expect, it } from 'vitest'
import { newOwnerId } from '../../../src/cache/owner-ids.js'

describe('lock owner ids', () => {
  it('100,000 in a row: all distinct, no ":", one fixed-length random part', () => {
    const ids = Array.from({ length: 100_000 }, () => newOwnerId())
    expect(new Set(ids).size).toBe(ids.length)
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{24}[0-9a-z]+$/)
    expect(new Set(ids.map((id) => id.slice(0, 24))).size).toBe(1)
    // with a fixed-length random part, `<a>:` starts `<b>:…` only when a = b
    const ofTen = ids.slice(0, 10)
    for (const a of ofTen) for (const b of ofTen) if (a !== b) expect(`${b}:1`.startsWith(`${a}:`)).toBe(false)
  })
})
