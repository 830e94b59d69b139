/**
 * Zipf-like key popularity: key k (1-based) is requested with probability ∝ 1 / k^s.
 * With 1,000 keys and s = 1, the top key gets ~13% of the traffic and half the keys get
 * a request only every few seconds: a realistic mix of hot and cold entries.
 */
export function zipfSampler(count: number, exponent = 1, random: () => number = Math.random): () => number {
  const cdf = new Float64Array(count)
  let total = 0
  for (let k = 1; k <= count; k++) {
    total += 1 / k ** exponent
    cdf[k - 1] = total
  }
  for (let i = 0; i < count; i++) cdf[i]! /= total
  return () => {
    const u = random()
    // Binary search for the first bucket whose cumulative probability reaches u.
    let lo = 0
    let hi = count - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cdf[mid]! < u) lo = mid + 1
      else hi = mid
    }
    return lo + 1
  }
}
