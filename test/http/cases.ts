/**
 * The conformance cases: what every adapter must do over real HTTP, as a table. Each
 * case declares its routes (framework-neutral handlers, see adapter.ts) and a run
 * against the served app; suite.ts serves every case's routes on one app per adapter
 * and file, each case under its own path, so keys never meet. Counted, not timed:
 * handler runs, statuses, X-Cache. The sleeps inside handlers only widen a window.
 */
import { expect } from 'vitest'
import type { NeutralHandler, NeutralOptions, NeutralResponse } from './adapter.js'
import type { Reply, SendOptions } from './client.js'
import { sleep, until } from '../support/timing.js'

export interface CaseRoute {
  /** Appended to the case's path ('' for the case's own URL). */
  sub: string
  options?: NeutralOptions
  handler: NeutralHandler
}

export interface CaseContext {
  /** The case's own URL path. */
  path: string
  port: number
  /** A request to the case's path + `sub`. */
  send(sub?: string, options?: SendOptions): Promise<Reply>
  /** Handler runs of the route at the case's path + `sub`. */
  runs(sub?: string): number
}

export interface ConformanceCase {
  group:
    | 'storability and Vary'
    | '304, Age and revalidation'
    | 'invalidation, poisoning, coalescing'
    | 'broken handlers and aborts'
  name: string
  /** The routes, made fresh for each app (handlers may keep state). */
  routes(): CaseRoute[]
  run(context: CaseContext): Promise<void>
}

/** Every case's routes start from these options. */
export const DEFAULT_OPTIONS: NeutralOptions = { ttl: '30s', xCacheHeader: true, cacheStatus: 'sg' }

const text = (body: string, headers: Record<string, string | string[]> = {}, status = 200): NeutralResponse => ({
  status,
  headers: { 'content-type': 'text/plain', ...headers },
  body,
})
const one = (handler: NeutralHandler, options?: NeutralOptions): CaseRoute[] => [
  { sub: '', handler, ...(options ? { options } : {}) },
]
const xCache = (reply: Reply) => reply.headers['x-cache']

async function* chunks(parts: string[], failAfter?: number): AsyncIterable<Buffer> {
  for (const [index, part] of parts.entries()) {
    if (index === failAfter) throw new Error('the database went away mid-response')
    yield Buffer.from(part)
    await sleep(1)
  }
}

export const CASES: ConformanceCase[] = [
  // ── storability and Vary ─────────────────────────────────────────────
  {
    group: 'storability and Vary',
    name: 'a 200 is stored and served: MISS then HIT, one handler run, Cache-Status says so',
    routes: () => one(() => text('the page', { etag: '"p1"' })),
    async run({ send, runs }) {
      const miss = await send()
      const hit = await send()
      expect([miss.status, xCache(miss), miss.headers['cache-status']]).toEqual([
        200,
        'MISS',
        'sg; fwd=uri-miss; stored',
      ])
      expect([hit.status, xCache(hit), hit.body.toString()]).toEqual([200, 'HIT', 'the page'])
      // The leader's client is answered before its response is committed, so a request sent
      // right after may still join that commit (collapsed) instead of hitting (as in
      // test/express/rfc-features.test.ts): either way from the cache, the handler ran once.
      expect(hit.headers['cache-status']).toMatch(/^sg; (hit|fwd=uri-miss; collapsed); ttl=\d+$/)
      expect(hit.headers['content-type']).toBe(miss.headers['content-type'])
      expect(runs()).toBe(1)
    },
  },
  {
    group: 'storability and Vary',
    name: 'HEAD is answered from the GET entry: no body, the GET Content-Length',
    routes: () => one(() => text('0123456789')),
    async run({ send, runs }) {
      await send()
      const head = await send('', { method: 'HEAD' })
      expect([head.status, xCache(head), head.body.length, head.headers['content-length']]).toEqual([
        200,
        'HIT',
        0,
        '10',
      ])
      expect(runs()).toBe(1)
    },
  },
  {
    group: 'storability and Vary',
    name: 'a cold HEAD fills the entry a later GET is served from, body included',
    routes: () => one(() => text('full body')),
    async run({ send, runs }) {
      const head = await send('', { method: 'HEAD' })
      expect([head.status, head.body.length, head.headers['content-length']]).toEqual([200, 0, '9'])
      const get = await send()
      expect([get.status, xCache(get), get.body.toString()]).toEqual([200, 'HIT', 'full body'])
      expect(runs()).toBe(1)
    },
  },
  {
    group: 'storability and Vary',
    name: 'private, no-store and Set-Cookie responses are never stored',
    routes: () => {
      let run = 0
      return [
        { sub: '/private', handler: () => text('mine', { 'cache-control': 'private' }) },
        { sub: '/no-store', handler: () => text('mine', { 'cache-control': 'no-store' }) },
        { sub: '/cookie', handler: () => text('mine', { 'set-cookie': `session=${++run}` }) },
      ]
    },
    async run({ send, runs }) {
      for (const sub of ['/private', '/no-store', '/cookie']) {
        const replies = [await send(sub), await send(sub)]
        expect(replies.map(xCache), sub).toEqual(['BYPASS', 'BYPASS'])
        expect(runs(sub), sub).toBe(2)
      }
      expect((await send('/cookie')).headers['set-cookie']).toEqual(['session=3'])
    },
  },
  {
    group: 'storability and Vary',
    name: 'Vary: Accept-Language keys one variant per value; Vary: * is not stored',
    routes: () => [
      {
        sub: '',
        handler: ({ headers }) => text(`page in ${headers['accept-language'] ?? 'none'}`, { vary: 'Accept-Language' }),
      },
      { sub: '/star', handler: () => text('varies on anything', { vary: '*' }) },
    ],
    async run({ send, runs }) {
      const language = (value: string) => send('', { headers: { 'accept-language': value } })
      const replies = [await language('en'), await language('fr'), await language('en'), await language('fr')]
      expect(replies.map((r) => [r.body.toString(), xCache(r)])).toEqual([
        ['page in en', 'MISS'],
        ['page in fr', 'MISS'],
        ['page in en', 'HIT'],
        ['page in fr', 'HIT'],
      ])
      expect(runs()).toBe(2)
      await send('/star')
      await send('/star')
      expect(runs('/star')).toBe(2)
    },
  },
  {
    group: 'storability and Vary',
    name: 'Vary: Accept-Encoding: spellings of one coding share a variant; the handler sees the reduced value',
    routes: () =>
      one(({ headers }) => text(`made for ${headers['accept-encoding'] ?? 'none'}`, { vary: 'Accept-Encoding' })),
    async run({ send, runs }) {
      const coded = async (value: string) => (await send('', { headers: { 'accept-encoding': value } })).body.toString()
      expect(await coded('gzip, br')).toBe('made for br')
      expect(await coded('br;q=1, GZIP;q=0.5')).toBe('made for br')
      expect(await coded('identity')).toBe('made for identity')
      expect(await coded('deflate')).toBe('made for identity')
      expect(runs()).toBe(2)
    },
  },
  {
    group: 'storability and Vary',
    name: 'requests with Cookie or Authorization pass by: neither served from the cache nor stored',
    routes: () => one(() => text('page')),
    async run({ send, runs }) {
      const cookie = await send('', { headers: { cookie: 'a=1' } })
      const authorized = await send('', { headers: { authorization: 'Bearer x' } })
      expect(xCache(cookie)).toBe('BYPASS')
      expect(authorized.headers['cache-status']).toBe('sg; fwd=request; detail=authorization')
      expect(xCache(await send())).toBe('MISS')
      expect(runs()).toBe(3)
    },
  },
  {
    group: 'storability and Vary',
    name: 'statuses outside the set (201, 302, 503) are not stored; 404 is',
    routes: () => [
      { sub: '/created', handler: () => text('made', {}, 201) },
      { sub: '/found', handler: () => text('there', { location: '/elsewhere' }, 302) },
      { sub: '/unavailable', handler: () => text('down', {}, 503) },
      { sub: '/missing', handler: () => text('no such page', {}, 404) },
    ],
    async run({ send, runs }) {
      for (const sub of ['/created', '/found', '/unavailable']) {
        await send(sub)
        await send(sub)
        expect(runs(sub), sub).toBe(2)
      }
      const missing = [await send('/missing'), await send('/missing')]
      expect(missing.map((r) => [r.status, xCache(r)])).toEqual([
        [404, 'MISS'],
        [404, 'HIT'],
      ])
      expect(runs('/missing')).toBe(1)
    },
  },
  {
    group: 'invalidation, poisoning, coalescing',
    name: "a request refused with a status outside the set (403, 429, 302) does not stop the URL's next 200 from being stored",
    routes: () =>
      one(({ headers }) => {
        const refusal = Number(headers['x-refuse'] ?? 0) // a WAF, a rate limit, a login redirect
        if (refusal === 302) return text('log in first', { location: '/login' }, 302)
        return refusal ? text('refused', {}, refusal) : text('the page')
      }),
    async run({ send, runs }) {
      // Anyone can be refused at will; were that a property of the URL (hit-for-miss), one
      // refused request every few seconds would turn caching and coalescing off for everyone.
      for (const refusal of ['403', '429', '302']) {
        const refused = await send('', { headers: { 'x-refuse': refusal } })
        expect([refused.status, xCache(refused)]).toEqual([Number(refusal), 'BYPASS'])
      }
      // The refused leader's client is answered before its flight ends: a request sent right
      // after may still join that flight, and, the response not being shared, run its own
      // handler uncached (BYPASS). The one after it stores. With hit-for-miss, both passed by.
      let clean = await send()
      if (xCache(clean) === 'BYPASS') clean = await send()
      const hit = await send()
      expect([clean, hit].map((r) => [r.status, xCache(r), r.body.toString()])).toEqual([
        [200, 'MISS', 'the page'],
        [200, 'HIT', 'the page'],
      ])
      expect(runs()).toBeLessThanOrEqual(5)
    },
  },
  {
    group: 'storability and Vary',
    name: 'a body over maxBodyBytes streams to its client whole and is not stored',
    routes: () =>
      one(() => ({ body: chunks(Array.from({ length: 8 }, (_, i) => String(i).repeat(500))) }), {
        ...DEFAULT_OPTIONS,
        maxBodyBytes: 1000,
      }),
    async run({ send, runs }) {
      const first = await send()
      const second = await send()
      const expected = Array.from({ length: 8 }, (_, i) => String(i).repeat(500)).join('')
      expect([first.status, first.body.toString(), xCache(first)]).toEqual([200, expected, 'BYPASS'])
      expect(second.body.toString()).toBe(expected)
      expect(runs()).toBe(2)
    },
  },
  {
    group: 'storability and Vary',
    name: 'a text/event-stream response passes through uncached',
    routes: () =>
      one(() => ({ headers: { 'content-type': 'text/event-stream' }, body: chunks(['data: 1\n\n', 'data: 2\n\n']) })),
    async run({ send, runs }) {
      const first = await send()
      expect([first.status, first.body.toString(), xCache(first)]).toEqual([200, 'data: 1\n\ndata: 2\n\n', 'BYPASS'])
      await send()
      expect(runs()).toBe(2)
    },
  },

  // ── 304, Age and revalidation ────────────────────────────────────────
  {
    group: '304, Age and revalidation',
    name: 'If-None-Match or If-Modified-Since matching the stored response: 304 without a body, from the cache',
    routes: () => one(() => text('page', { etag: '"v1"', 'last-modified': 'Mon, 07 Dec 2026 10:00:00 GMT' })),
    async run({ send, runs }) {
      await send()
      const byEtag = await send('', { headers: { 'if-none-match': '"v1"' } })
      const byDate = await send('', { headers: { 'if-modified-since': 'Mon, 07 Dec 2026 11:00:00 GMT' } })
      const other = await send('', { headers: { 'if-none-match': '"v0"' } })
      expect([byEtag.status, byEtag.body.length, byEtag.headers.etag, xCache(byEtag)]).toEqual([304, 0, '"v1"', 'HIT'])
      expect([byDate.status, byDate.body.length]).toEqual([304, 0])
      expect([other.status, other.body.toString()]).toEqual([200, 'page'])
      expect(runs()).toBe(1)
    },
  },
  {
    group: '304, Age and revalidation',
    name: "Age is the stored response's age: its own Age plus its time in the cache",
    routes: () => one(() => text('aged', { age: '100' })),
    async run({ send }) {
      const miss = await send()
      const hit = await send()
      expect(Number(miss.headers.age)).toBeGreaterThanOrEqual(100)
      expect(Number(hit.headers.age)).toBeGreaterThanOrEqual(100)
      expect(xCache(hit)).toBe('HIT')
    },
  },
  {
    group: '304, Age and revalidation',
    name: 'no-cache with an ETag is stored and revalidated: the handler sees If-None-Match, its 304 refreshes the entry',
    routes: () => {
      let version = 0
      return one(
        ({ headers }) =>
          headers['if-none-match'] === '"r1"'
            ? { status: 304, headers: { etag: '"r1"', 'cache-control': 'no-cache', 'x-version': String(++version) } }
            : text('the same body', { etag: '"r1"', 'cache-control': 'no-cache', 'x-version': String(++version) }),
        { ...DEFAULT_OPTIONS, honorCacheControl: true },
      )
    },
    async run({ send, runs }) {
      const miss = await send()
      expect(xCache(miss)).toBe('MISS')
      await sleep(50) // past the 1 ms freshness of a no-cache entry
      const second = await send()
      expect([second.status, second.body.toString(), xCache(second)]).toEqual([200, 'the same body', 'REVALIDATED'])
      expect(second.headers['cache-status']).toBe('sg; fwd=stale; fwd-status=304; stored')
      expect(second.headers['x-version']).toBe('2')
      expect(runs()).toBe(2)
    },
  },
  {
    group: '304, Age and revalidation',
    name: 'stale-while-revalidate: STALE at once, one background run refreshes the entry',
    routes: () => {
      let version = 0
      return one(() => text(`version ${++version}`), { ...DEFAULT_OPTIONS, ttl: 150, staleTtl: '30s' })
    },
    async run({ send, runs }) {
      expect((await send()).body.toString()).toBe('version 1')
      await sleep(200) // past ttl
      const stale = await send()
      expect([xCache(stale), stale.body.toString()]).toEqual(['STALE', 'version 1'])
      await until(() => runs() === 2, 'the background refresh')
      await until(async () => (await send()).body.toString() === 'version 2', 'the refreshed entry')
      expect(runs()).toBe(2)
    },
  },

  // ── invalidation, poisoning, coalescing ──────────────────────────────
  {
    group: 'invalidation, poisoning, coalescing',
    name: 'a successful POST invalidates the URL; a failed one (4xx) does not',
    routes: () =>
      one(({ method, headers }) => (method === 'POST' ? text('no', {}, headers['x-fail'] ? 403 : 200) : text('page'))),
    async run({ send, runs }) {
      await send()
      expect(xCache(await send())).toBe('HIT')
      expect((await send('', { method: 'POST', headers: { 'x-fail': '1' } })).status).toBe(403)
      expect(xCache(await send())).toBe('HIT')
      expect((await send('', { method: 'POST' })).status).toBe(200)
      expect(xCache(await send())).toBe('MISS')
      expect(runs()).toBe(4)
    },
  },
  {
    group: 'invalidation, poisoning, coalescing',
    name: "a write's Location on the same host is invalidated too",
    routes: () => [
      { sub: '', handler: ({ url }) => text('created', { location: `${url}/other` }, 201) },
      { sub: '/other', handler: () => text('other page') },
    ],
    async run({ send, runs }) {
      await send('/other')
      expect(xCache(await send('/other'))).toBe('HIT')
      expect((await send('', { method: 'PUT' })).status).toBe(201)
      expect(xCache(await send('/other'))).toBe('MISS')
      expect(runs('/other')).toBe(2)
    },
  },
  {
    group: 'invalidation, poisoning, coalescing',
    name: 'X-Forwarded-Host other than Host, X-Forwarded-Prefix, a GET with a body: never served to a clean request',
    routes: () =>
      one(({ headers }) =>
        text(`links to ${headers['x-forwarded-host'] ?? ''}${headers['x-forwarded-prefix'] ?? ''}/home`),
      ),
    async run({ send, runs }) {
      const host = await send('', { headers: { 'x-forwarded-host': 'evil.test' } })
      expect(xCache(host)).toBe('BYPASS')
      const prefixed = await send('', { headers: { 'x-forwarded-prefix': '/evil' } })
      expect(prefixed.body.toString()).toBe('links to /evil/home')
      const fat = await send('', { method: 'GET', body: 'x', headers: { 'content-length': '1' } })
      expect(xCache(fat)).toBe('BYPASS')
      const clean = [await send(), await send()]
      expect(clean.map((r) => [r.body.toString(), xCache(r)])).toEqual([
        ['links to /home', 'MISS'],
        ['links to /home', 'HIT'],
      ])
      expect(runs()).toBe(4)
    },
  },
  {
    group: 'invalidation, poisoning, coalescing',
    name: "an absolute-form target naming another authority: never stored for, or served to, the Host's URL",
    routes: () => one(({ authority }) => text(`links to http://${authority}/home`)),
    async run({ send }) {
      // `GET http://evil.test/cN` with `Host: shop.test`: frameworks route it (or not) their own
      // way, and some build the request's URL from the request-target's authority.
      const forged = await send('', { absoluteFormAuthority: 'evil.test' })
      expect(xCache(forged)).not.toBe('HIT')
      const clean = [await send(), await send()]
      expect(clean.map((r) => [r.body.toString(), xCache(r)])).toEqual([
        ['links to http://shop.test/home', 'MISS'],
        ['links to http://shop.test/home', 'HIT'],
      ])
    },
  },
  {
    group: 'invalidation, poisoning, coalescing',
    name: 'a burst of 10 on a cold URL runs the handler once; all get its response',
    routes: () =>
      one(async () => {
        await sleep(150) // the window in which the burst arrives
        return text('cold page')
      }),
    async run({ send, runs }) {
      const replies = await Promise.all(Array.from({ length: 10 }, () => send()))
      expect(replies.map((r) => [r.status, r.body.toString()])).toEqual(Array(10).fill([200, 'cold page']))
      expect(runs()).toBe(1)
    },
  },
  {
    group: 'invalidation, poisoning, coalescing',
    name: "a leader's 500 goes to its client only; the waiters queue behind one new leader",
    routes: () => {
      let run = 0
      return one(async () => {
        const mine = ++run
        await sleep(150)
        return mine === 1 ? text('origin down', {}, 500) : text(`answered by run ${mine}`)
      })
    },
    async run({ send, runs }) {
      const leader = send()
      await until(() => runs() === 1, 'the leader to start')
      const waiters = await Promise.all(Array.from({ length: 9 }, () => send()))
      expect((await leader).status).toBe(500)
      expect(waiters.map((r) => [r.status, r.body.toString()])).toEqual(Array(9).fill([200, 'answered by run 2']))
      expect(runs()).toBe(2)
    },
  },

  // ── broken handlers and aborts ───────────────────────────────────────
  {
    group: 'broken handlers and aborts',
    name: 'a handler that throws: its client gets the framework 500, nothing is stored',
    routes: () =>
      one(() => {
        throw new Error('handler bug')
      }),
    async run({ send, runs }) {
      const replies = [await send(), await send()]
      expect(replies.map((r) => r.status)).toEqual([500, 500])
      expect(runs()).toBe(2)
    },
  },
  {
    group: 'broken handlers and aborts',
    name: 'a body that fails midway: its client gets a cut response, nothing is stored, the next request runs again',
    routes: () => {
      let run = 0
      return one(() => (++run === 1 ? { body: chunks(['partial ', 'rest'], 1) } : text(`answered by run ${run}`)))
    },
    async run({ send, runs }) {
      const cut = await send()
      expect(cut.complete).toBe(false)
      const next = await send()
      expect([next.status, next.body.toString(), xCache(next)]).toEqual([200, 'answered by run 2', 'MISS'])
      expect(xCache(await send())).toBe('HIT')
      expect(runs()).toBe(2)
    },
  },
  {
    group: 'broken handlers and aborts',
    name: 'a leader whose client goes away does not strand its waiters',
    routes: () =>
      one(async () => {
        await sleep(200)
        return text('slow page')
      }),
    async run({ send, runs }) {
      const gone = send('', { abortAfterMs: 50 })
      await until(() => runs() === 1, 'the leader to start')
      const waiter = await send()
      expect([waiter.status, waiter.body.toString()]).toEqual([200, 'slow page'])
      expect((await gone).status).toBe(0)
      expect(runs()).toBeLessThanOrEqual(2)
    },
  },
  {
    group: 'broken handlers and aborts',
    name: 'the cache failing while the handler streams (hardTimeout): the whole response still reaches the client, in order',
    routes: () =>
      one(
        () => ({
          headers: { 'content-type': 'text/plain' },
          body: (async function* () {
            yield Buffer.from('first ')
            await sleep(300) // past hardTimeout: the cache gives up on this request and fails open
            yield Buffer.from('second ')
            yield Buffer.from('third')
          })(),
        }),
        { ...DEFAULT_OPTIONS, hardTimeout: 100 },
      ),
    async run({ send, runs }) {
      const reply = await send()
      expect([reply.status, reply.body.toString(), reply.complete]).toEqual([200, 'first second third', true])
      expect(runs()).toBe(1)
    },
  },
  {
    group: 'broken handlers and aborts',
    name: 'a handler slower than handlerTimeout: its response still reaches its client, uncached',
    routes: () =>
      one(
        async () => {
          await sleep(300)
          return text('late page')
        },
        { ...DEFAULT_OPTIONS, handlerTimeout: 100 },
      ),
    async run({ send, runs }) {
      const late = await send()
      expect([late.status, late.body.toString(), xCache(late)]).toEqual([200, 'late page', 'BYPASS'])
      expect(runs()).toBe(1)
    },
  },
]
