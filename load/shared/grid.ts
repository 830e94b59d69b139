/** A plain-text table, as the benchmarks print their results. */

/** Any table of strings: the first column left-aligned (or as `left` says), the others right-aligned. */
export function renderGrid(
  headers: string[],
  rows: string[][],
  left: (column: number) => boolean = (column) => column === 0,
): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: string[]) =>
    cells.map((cell, i) => (left(i) ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ')
  const rule = widths.map((w) => '─'.repeat(w)).join('  ')
  return [line(headers), rule, ...rows.map(line)].join('\n')
}
