/**
 * The "database" behind the load-test app: something slow that we can count.
 *
 * Two implementations: a built-in timer-based source (default: runs anywhere) and real
 * PostgreSQL (when DATABASE_URL is set). The harness composes them with the fault
 * injector and the query counter; the app only ever sees `ItemSource`.
 */
export interface Item {
  id: number
  name: string
  priceCents: number
  /** When this copy was read from the database (epoch ms): shows how old a cached value is. */
  loadedAt: number
}

export interface ItemSource {
  /** One database query. Rejects when the database fails. */
  load(id: number): Promise<Item>
  close(): Promise<void>
}

/** Number of rows every source holds: ids 1..ITEM_COUNT (the zipf scenario spreads over all of them). */
export const ITEM_COUNT = 1000

/** Which database the harness talks to, decided once in the harness and passed to workers. */
export type SourceKind = { kind: 'builtin' } | { kind: 'postgres'; url: string }

export function sourceKindFromEnv(env: NodeJS.ProcessEnv = process.env): SourceKind {
  return env.DATABASE_URL ? { kind: 'postgres', url: env.DATABASE_URL } : { kind: 'builtin' }
}

/** For logs: never print credentials that may be in DATABASE_URL. */
export function describeSource(source: SourceKind): string {
  if (source.kind === 'builtin') return 'built-in slow source (a timer stands in for the query)'
  const url = new URL(source.url)
  return `PostgreSQL at ${url.hostname}:${url.port || 5432}${url.pathname}`
}
