import type { KoaContextLike } from './context.js'

/** A response to put on `ctx`: the engine's replay plan (src/http/replay.ts), framework-free. */
export interface KoaReplay {
  status: number
  statusMessage?: string
  /** Fields set above the cache that the stored response removed. */
  remove: string[]
  headers: Array<[name: string, value: string | string[]]>
  /** Undefined: a bodyless status. An empty Buffer for HEAD, whose Content-Length is the GET's. */
  body: Buffer | undefined
}

/**
 * Puts a replay on `ctx`, as the downstream would have: middleware above the cache sees
 * (and may change) `ctx.status`, the fields and `ctx.body`, and Koa sends it. The order
 * matters to Koa's setters: the body first (it would otherwise pick a Content-Type and
 * make the status 200), then the stored fields (Content-Type and Content-Length win),
 * then the status (which drops the body of a 204/304).
 */
export function replayOnContext(ctx: KoaContextLike, replay: KoaReplay, head: boolean): void {
  if (replay.body !== undefined && !head) ctx.body = replay.body
  for (const name of replay.remove) ctx.remove(name)
  // Koa types a Buffer body application/octet-stream; a stored response without a type has none.
  if (!replay.headers.some(([name]) => name.toLowerCase() === 'content-type')) ctx.remove('Content-Type')
  for (const [name, value] of replay.headers) ctx.set(name, value)
  ctx.status = replay.status
  if (replay.statusMessage !== undefined) ctx.message = replay.statusMessage
}
