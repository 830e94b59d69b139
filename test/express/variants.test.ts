/**
 * Rule 8 / acceptance 3: Vary. The URL entry records which request headers select a
 * variant; each variant is stored and served separately.
 */
import type { RequestHandler } from 'express'
import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import { useRouteHarness } from './helpers.js'

const GREETING: Record<string, string> = { en: 'hello', fr: 'bonjour', de: 'hallo' }

describe.skipIf(!redisAvailable)('variants', () => {
  const { route: app, runs } = useRouteHarness()

  const greet: RequestHandler = (req, res) => {
    res.set('Vary', 'Accept-Language').send(GREETING[req.headers['accept-language'] ?? 'en'] ?? 'hello')
  }

  it('stores and serves two Accept-Language variants separately', async () => {
    const server = await app(greet)
    const calls = [] as Array<[string, string, string]>
    for (const language of ['en', 'fr', 'en', 'fr', 'fr']) {
      const res = await server.get('/r').set('Accept-Language', language)
      calls.push([language, res.text, res.headers['x-cache']!])
      expect(res.headers.vary).toBe('Accept-Language')
    }
    expect(calls).toEqual([
      ['en', 'hello', 'MISS'],
      ['fr', 'bonjour', 'MISS'],
      ['en', 'hello', 'HIT'],
      ['fr', 'bonjour', 'HIT'],
      ['fr', 'bonjour', 'HIT'],
    ])
    expect(runs()).toBe(2)
  })

  it('treats an absent header as its own variant, apart from an empty one', async () => {
    const server = await app(
      (req, res) => void res.set('Vary', 'X-Flag').send(`flag=${JSON.stringify(req.headers['x-flag'] ?? null)}`),
    )
    expect((await server.get('/r')).text).toBe('flag=null')
    expect((await server.get('/r').set('X-Flag', '')).text).toBe('flag=""')
    expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
    expect(runs()).toBe(2)
  })

  it('varyOn keys on request headers the handler reads without declaring them', async () => {
    const server = await app((req, res) => void res.send(`tenant ${req.headers['x-tenant']}`), { varyOn: ['X-Tenant'] })
    const texts = []
    for (const tenant of ['a', 'b', 'a', 'b']) texts.push((await server.get('/r').set('X-Tenant', tenant)).text)
    expect(texts).toEqual(['tenant a', 'tenant b', 'tenant a', 'tenant b'])
    expect(runs()).toBe(2)
  })

  it('an unsafe method invalidates every variant of the URL at once', async () => {
    let version = 1
    const server = await app((req, res) => {
      if (req.method === 'POST') return void res.status(204).end(String(version++))
      res.set('Vary', 'Accept-Language').send(`${GREETING[req.headers['accept-language']!]} v${version}`)
    })
    for (const language of ['en', 'fr', 'de']) await server.get('/r').set('Accept-Language', language)
    await server.post('/r')
    for (const language of ['en', 'fr', 'de']) {
      const res = await server.get('/r').set('Accept-Language', language)
      expect(res.headers['x-cache']).toBe('MISS')
      expect(res.text).toBe(`${GREETING[language]} v2`)
    }
    expect(runs()).toBe(7)
  })

  it('a response whose Vary names a header the stored list does not key on is not stored', async () => {
    let extra = false
    const server = await app((req, res) => {
      res
        .set('Vary', extra ? 'Accept-Language, X-Extra' : 'Accept-Language')
        .send(`${GREETING[req.headers['accept-language']!]} ${req.headers['x-extra'] ?? ''}`)
    })
    await server.get('/r').set('Accept-Language', 'en') // list: [accept-language]
    extra = true
    const a = await server.get('/r').set('Accept-Language', 'fr').set('X-Extra', '1')
    const b = await server.get('/r').set('Accept-Language', 'fr').set('X-Extra', '2')
    expect([a.text, b.text]).toEqual(['bonjour 1', 'bonjour 2'])
    expect([a.headers['x-cache'], b.headers['x-cache']]).toEqual(['BYPASS', 'BYPASS'])
  })
})
