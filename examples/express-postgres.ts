/**
 * Example 4: Express + PostgreSQL (pg) as the real slow database.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx examples/express-postgres.ts
 *
 * A products table; GET /products/:id is cached with getOrLoad, PUT /products/:id
 * updates the row and deletes the cache entry (everywhere, and fenced: a load that
 * started before the update cannot store the old row after it). The script sends a
 * burst of GETs, a PUT, and a GET, printing how many SQL queries each step cost.
 */
import type { AddressInfo } from 'node:net'
import express from 'express'
import { Redis } from 'ioredis'
import pg from 'pg'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const db = new pg.Pool({ connectionString: databaseUrl, max: 5 })
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
if (!redis) console.log('REDIS_URL is not set: in-process mode')
const cache = createCache({ redis, namespace: 'example-pg', ttl: '60s' })

interface Product {
  id: number
  name: string
  priceCents: number
}

await db.query(
  `CREATE TABLE IF NOT EXISTS example_products (id integer PRIMARY KEY, name text NOT NULL, price_cents integer NOT NULL)`,
)
await db.query(
  `INSERT INTO example_products VALUES (1, 'Teapot', 2500), (2, 'Kettle', 4000) ON ` +
    `CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, price_cents = EXCLUDED.price_cents`,
)
await cache.delete('product:1') // start cold

let queries = 0
/** The slow query: pg_sleep stands in for a heavy join. null = no such product (cached too). */
async function loadProduct(id: number): Promise<Product | null> {
  queries++
  const { rows } = await db.query<{ id: number; name: string; price_cents: number }>(
    'SELECT id, name, price_cents FROM example_products, pg_sleep(0.2) WHERE id = $1',
    [id],
  )
  const row = rows[0]
  return row ? { id: row.id, name: row.name, priceCents: row.price_cents } : null
}

const app = express()
app.use(express.json())

app.get('/products/:id', async (req, res, next) => {
  try {
    const id = Number(req.params.id)
    const product = await cache.getOrLoad(`product:${id}`, () => loadProduct(id))
    if (product) res.json(product)
    else res.status(404).json({ error: 'not found' })
  } catch (err) {
    next(err)
  }
})

app.put('/products/:id', async (req, res, next) => {
  try {
    const id = Number(req.params.id)
    const { rows } = await db.query('UPDATE example_products SET price_cents = $2 WHERE id = $1 RETURNING id', [
      id,
      Number(req.body.priceCents),
    ])
    if (rows.length === 0) {
      res.status(404).json({ error: 'not found' })
      return
    }
    // Invalidate after the write: every process drops it, the next GET reloads it.
    await cache.delete(`product:${id}`)
    res.status(204).end()
  } catch (err) {
    next(err)
  }
})

const server = app.listen(0, '127.0.0.1')
await new Promise((resolve) => server.once('listening', resolve))
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const getProduct = async () => (await (await fetch(`${base}/products/1`)).json()) as Product

const burst = await Promise.all(Array.from({ length: 25 }, getProduct))
console.log(`25 simultaneous GET /products/1 → price ${burst[0]!.priceCents}; SQL queries so far: ${queries}`)
const beforePut = queries

const put = await fetch(`${base}/products/1`, {
  method: 'PUT',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ priceCents: 1999 }),
})
console.log(`PUT /products/1 {"priceCents":1999} → ${put.status}; the cache entry is deleted`)

const after = await getProduct()
console.log(`GET /products/1 → price ${after.priceCents} (fresh from the database); SQL queries so far: ${queries}`)

server.close()
await cache.close()
await redis?.quit()
await db.end()
if (beforePut !== 1 || after.priceCents !== 1999)
  throw new Error(`unexpected: ${beforePut} queries for the burst, price ${after.priceCents}`)
