/**
 * What a replay sends (src/http/replay.ts) when one stored response is replayed many
 * times: the fields it keeps are worked out once per response, so each replay must still
 * get the fields its own options ask for, and no replay may change what the next sends.
 */
import { describe, expect, it } from 'vitest'
import { replayPlan, type Replayable } from '../../../src/http/replay.js'

const stored = (): Replayable => ({
  status: 200,
  headers: [
    ['Content-Type', 'text/plain'],
    ['Connection', 'x-hop'],
    ['X-Hop', '1'],
    ['Age', '7'],
    ['ETag', '"v1"'],
    ['Surrogate-Control', 'max-age=60'],
    ['Content-Length', '999'],
  ],
  body: Buffer.from('hello'),
})

const names = (plan: ReturnType<typeof replayPlan>) => plan.headers.map(([name]) => name)

describe('replayPlan', () => {
  it('gives each replay of one response the fields its own options keep', () => {
    const response = stored()
    const hit = replayPlan(response, { head: false, ageSeconds: 3, omit: ['surrogate-control'] })
    expect(hit.headers).toEqual([
      ['Content-Type', 'text/plain'],
      ['ETag', '"v1"'],
      ['Age', '3'],
      ['Content-Length', '5'],
    ])
    // No Age given: the response's own is kept; nothing omitted: Surrogate-Control goes out.
    const own = replayPlan(response, { head: false })
    expect(names(own)).toEqual(['Content-Type', 'Age', 'ETag', 'Surrogate-Control', 'Content-Length'])
    expect(names(replayPlan(response, { head: false, ageSeconds: 0, omit: ['etag'] }))).toEqual([
      'Content-Type',
      'Surrogate-Control',
      'Age',
      'Content-Length',
    ])
    expect(replayPlan(response, { head: false, ageSeconds: 3, omit: ['surrogate-control'] })).toEqual(hit)
  })

  it('a plan changed after it was made leaves the next replay as it was', () => {
    const response = stored()
    const first = replayPlan(response, { head: false, ageSeconds: 1 })
    first.headers.length = 0
    first.remove.push('x-extra')
    const second = replayPlan(response, { head: false, ageSeconds: 1 })
    expect(names(second)).toEqual(['Content-Type', 'ETag', 'Surrogate-Control', 'Age', 'Content-Length'])
    expect(second.remove).toEqual([])
  })

  it('a matching validator still turns a replay into a 304 with only the fields a 304 keeps', () => {
    const response = stored()
    replayPlan(response, { head: false, ageSeconds: 1 })
    const notModified = replayPlan(response, {
      head: false,
      ageSeconds: 1,
      validators: { ifNoneMatch: '"v1"', ifModifiedSince: undefined },
    })
    expect([notModified.status, notModified.body, names(notModified)]).toEqual([304, undefined, ['ETag', 'Age']])
    expect(notModified.remove).toEqual(['content-length'])
    expect(replayPlan(response, { head: false, ageSeconds: 1 }).status).toBe(200)
  })
})
