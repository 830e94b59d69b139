/**
 * `Accept-Encoding` reduced to the one coding a stored variant is made with, as Varnish
 * and CDNs do: every spelling of "gzip or br" (`gzip, br`, `br,gzip`, `GZIP`, q-values)
 * would otherwise be its own variant and its own handler run, and a client could
 * fragment the cache at will.
 *
 * The handler, run as the cache's fetch, sees the reduced value instead of the client's
 * (see Exchange), so what is stored under a variant is made for that value, and every
 * client mapped to it accepts it: the chosen coding has q > 0 for the client, and so
 * has `identity` (a handler may always answer uncompressed), or the request passes by.
 */

/** The codings a variant may be made with; on equal q, the earlier one wins (smallest body first). */
const CODINGS = ['br', 'gzip', 'identity'] as const
export type Coding = (typeof CODINGS)[number]

/** coding (lower case) → q. `x-gzip` is gzip (RFC 9110 §8.4.1.3). Members with a malformed q are ignored. */
function qualities(value: string): Map<string, number> {
  const weights = new Map<string, number>()
  for (const member of value.split(',')) {
    const [name = '', ...parameters] = member.split(';').map((part) => part.trim().toLowerCase())
    if (name === '') continue
    let q = 1
    for (const parameter of parameters) {
      if (!/^q\s*=/.test(parameter)) continue
      const match = /^q\s*=\s*([0-9](?:\.[0-9]{0,3})?)$/.exec(parameter)
      q = match && Number(match[1]) <= 1 ? Number(match[1]) : Number.NaN
    }
    if (Number.isNaN(q)) continue
    const coding = name === 'x-gzip' ? 'gzip' : name
    if (!weights.has(coding)) weights.set(coding, q)
  }
  return weights
}

/**
 * The q a client gives `coding`: its own entry, else `*`'s (RFC 9110 §12.5.3). Identity,
 * when not named, is acceptable but least preferred: the lowest q the client listed, as
 * negotiator (compression's) ranks it, so `gzip;q=0.5, br;q=0.6` picks br, not identity.
 */
function qualityOf(weights: Map<string, number>, coding: Coding): number {
  const stated = weights.get(coding) ?? weights.get('*')
  if (stated !== undefined || coding !== 'identity') return stated ?? 0
  return Math.min(1, ...[...weights.values()].filter((q) => q > 0))
}

/**
 * The coding this client's variant is made with: among br, gzip and identity the one
 * with the highest q (ties: br, gzip, identity). Absent or empty means identity.
 * Undefined when the client refuses identity (`identity;q=0`, `*;q=0`): such a request
 * passes by uncached, its handler seeing the header as sent.
 */
export function reducedAcceptEncoding(value: string | string[] | undefined): Coding | undefined {
  if (value === undefined) return 'identity'
  const weights = qualities(Array.isArray(value) ? value.join(',') : value)
  if (qualityOf(weights, 'identity') <= 0) return undefined
  let best: Coding = 'identity'
  let bestQuality = 0
  for (const coding of CODINGS) {
    const quality = qualityOf(weights, coding)
    if (quality > bestQuality) [best, bestQuality] = [coding, quality]
  }
  return best
}
