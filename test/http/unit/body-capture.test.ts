/**
 * The capture of a response object (src/http/body-capture.ts), the bounds the conformance
 * table does not reach over HTTP: the shared budget, Content-Length framing, stopping at
 * once (failing open), and the budget given back whatever the outcome.
 */
import { describe, expect, it } from 'vitest'
import { captureBody, type BodySource, type OriginResponse } from '../../../src/http/body-capture.js'
import { CaptureBudget } from '../../../src/http/capture-budget.js'

const response = (body: BodySource, headers: OriginResponse['headers'] = []): Promise<OriginResponse> =>
  Promise.resolve({ status: 200, headers, body })

async function* parts(...chunks: string[]): AsyncIterable<Buffer> {
  for (const chunk of chunks) yield Buffer.from(chunk)
}

async function text(source: BodySource): Promise<string> {
  if (source === null || source === undefined) return ''
  if (typeof source === 'string' || source instanceof Uint8Array) return Buffer.from(source).toString()
  let out = ''
  for await (const chunk of source) out += Buffer.from(chunk).toString()
  return out
}

const limits = (budget = new CaptureBudget(1 << 20)) => ({ maxBodyBytes: 1 << 20, timeoutMs: 5_000, budget })

describe('captureBody', () => {
  it('completes within the bounds and gives the budget back', async () => {
    const budget = new CaptureBudget(1 << 20)
    const end = await captureBody(response(parts('a', 'b', 'c')), limits(budget))
    expect(end.kind === 'complete' && end.response.body.toString()).toBe('abc')
    expect(budget.used).toBe(0)
  })

  it('a chunk past the shared budget releases the capture: the client still gets every byte, in order', async () => {
    const budget = new CaptureBudget(8 * 1024)
    const big = 'x'.repeat(6 * 1024)
    const end = await captureBody(response(parts(big, big, 'tail')), limits(budget))
    expect(end.kind === 'released' && end.reason).toBe('over-budget')
    expect(budget.used).toBe(0)
    if (end.kind === 'released') expect(await text((await end.response).body)).toBe(big + big + 'tail')
  })

  it('a body that is not its Content-Length is released as truncated, sent as produced', async () => {
    const end = await captureBody(response(parts('short'), [['content-length', '10']]), limits())
    expect(end.kind === 'released' && end.reason).toBe('truncated')
    if (end.kind === 'released') expect(await text((await end.response).body)).toBe('short')
  })

  it('a stream that fails midway is broken: its rest fails as the body did', async () => {
    async function* failing() {
      yield Buffer.from('partial ')
      throw new Error('gone')
    }
    const end = await captureBody(response(failing()), limits())
    expect(end.kind === 'released' && end.reason).toBe('broken')
    if (end.kind === 'released') await expect(text((await end.response).body)).rejects.toThrow('gone')
  })

  it('stop (failing open) releases at once; the pending chunk and the rest still reach the client', async () => {
    let resume!: () => void
    const held = new Promise<void>((resolve) => (resume = resolve))
    async function* slow() {
      yield Buffer.from('first ')
      await held
      yield Buffer.from('second')
    }
    let stop!: () => void
    const stopped = new Promise<void>((resolve) => (stop = resolve))
    const capturing = captureBody(response(slow()), limits(), Date.now(), stopped)
    setImmediate(stop)
    const end = await capturing
    expect(end.kind === 'released' && end.reason).toBe('timeout')
    resume()
    if (end.kind === 'released') expect(await text((await end.response).body)).toBe('first second')
  })
})
