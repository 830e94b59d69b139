/**
 * One app instance of the coupon scenario: on `run`, it builds the named contender and
 * issues a coupon to each of its users, `concurrency` at a time, timing each issue.
 * env: COUPON_DATABASE_URL, COUPON_SCHEMA, COUPON_REDIS_URL.
 */
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import type { ContenderEntry } from './contender.js'
import { CONTENDERS } from './contenders.js'
import type { FromWorker, ToWorker } from './protocol.js'

const send = (message: FromWorker) => process.send?.(message)
const pool = new pg.Pool({ connectionString: process.env.COUPON_DATABASE_URL, max: 8 })
const context = { pool, schema: process.env.COUPON_SCHEMA!, couponId: 1, redisUrl: process.env.COUPON_REDIS_URL! }

/** COUPON_CONTENDER_MODULE: contenders registered elsewhere (load/compare/), imported before `ready` so no run pays for it. */
const contenderModule = process.env.COUPON_CONTENDER_MODULE
const moreContenders: Record<string, ContenderEntry> = contenderModule
  ? ((await import(pathToFileURL(contenderModule).href)) as { CONTENDERS: Record<string, ContenderEntry> }).CONTENDERS
  : {}

process.on('message', async (message: ToWorker) => {
  if (message.type !== 'run') return
  const entry = CONTENDERS[message.contender] ?? moreContenders[message.contender]!
  const contender = await entry.create(context)
  const latenciesMs: number[] = []
  const outcomes: Record<string, number> = {}
  const errors: string[] = []
  let retries = 0
  const queue = [...message.users]
  await Promise.all(
    Array.from({ length: message.concurrency }, async () => {
      for (let user = queue.shift(); user !== undefined; user = queue.shift()) {
        const startedAt = performance.now()
        try {
          const issue = await contender.issue(user)
          outcomes[issue.outcome] = (outcomes[issue.outcome] ?? 0) + 1
          retries += issue.retries
        } catch (error) {
          errors.push(`${(error as Error).name}: ${(error as Error).message}`)
        }
        latenciesMs.push(performance.now() - startedAt)
      }
    }),
  )
  await contender.close()
  send({ type: 'done', latenciesMs, outcomes, retries, errors })
})
process.once('disconnect', () => {
  void pool.end().finally(() => process.exit(0))
})
send({ type: 'ready' })
