/** Number formatting shared by the table, the chart legends and the demo's sentences. */

export const int = (n: number): string => Math.round(n).toLocaleString('en-US')

export const ms = (n: number): string => (n >= 100 ? int(n) : n.toFixed(n >= 10 ? 0 : 1))

/** "1,234×" / "12.3×" / "—" */
export function factor(n: number | null): string {
  if (n === null || !Number.isFinite(n)) return '—'
  return n >= 100 ? `${int(n)}×` : `${n.toFixed(1)}×`
}

/** Colors only when writing to a terminal that wants them. */
export function useColor(stream: NodeJS.WriteStream = process.stdout): boolean {
  return Boolean(stream.isTTY) && !process.env.NO_COLOR
}

export const bold = (s: string, color = useColor()) => (color ? `\x1b[1m${s}\x1b[22m` : s)
export const dim = (s: string, color = useColor()) => (color ? `\x1b[2m${s}\x1b[22m` : s)
