// Run by scripts/consumer-check.sh: the package is ESM-only; require() works through Node's
// require(esm) (Node >= 20.19, no top-level await in the package).
const { createCache, createLocks } = require('stampede-guard')
const { cacheRoute } = require('stampede-guard/express')

async function main() {
  const cache = createCache({ ttl: '1m' })
  let loads = 0
  const load = async () => (loads++, { at: new Date(0) })
  await cache.getOrLoad('k', load)
  const again = await cache.getOrLoad('k', load)
  await cache.close()
  const kinds = [typeof createCache, typeof createLocks, typeof cacheRoute].join(', ')
  console.log(
    `CJS: require() gave functions (${kinds}); in-process cache: ${loads} load(s), value ${again.at instanceof Date ? 'a Date' : typeof again.at}`,
  )
  if (loads !== 1 || kinds !== 'function, function, function') process.exit(1)
}
main().catch((error) => {
  console.error(error)
  process.exit(1)
})
