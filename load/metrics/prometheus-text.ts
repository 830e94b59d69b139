/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4, plus the
 * `# UNIT` line the OpenTelemetry exporter writes). Strict on purpose: the test of the
 * /metrics endpoint uses it to prove the scrape parses, so a malformed line, a sample
 * before its family's `# TYPE`, a repeated `# TYPE`, or a histogram sample without `le`
 * throws with its line number instead of being skipped.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped'

export interface Sample {
  /** The sample's own name: a histogram family `x` has samples `x_bucket`, `x_sum`, `x_count`. */
  name: string
  labels: Record<string, string>
  value: number
}

export interface MetricFamily {
  name: string
  type: MetricType
  help: string
  unit: string
  samples: Sample[]
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const TYPES = new Set<string>(['counter', 'gauge', 'histogram', 'summary', 'untyped'])
const SUFFIXES: Record<MetricType, string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
}

export class ExpositionError extends Error {
  constructor(line: number, message: string) {
    super(`line ${line}: ${message}`)
  }
}

/** Parses a whole scrape into its metric families, by family name. */
export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>()
  const typedFamilies = new Set<string>() // those given a # TYPE
  const lines = text.split('\n')
  if (lines.at(-1) === '') lines.pop()
  lines.forEach((raw, index) => {
    const number = index + 1
    const line = raw.trimEnd()
    if (line === '') return
    if (line.startsWith('#')) {
      const match = /^#\s+(HELP|TYPE|UNIT)\s+(\S+)(?:\s+(.*))?$/.exec(line)
      if (!match) return // a plain comment
      const [, keyword, name = '', rest = ''] = match
      if (!NAME.test(name)) throw new ExpositionError(number, `invalid metric name '${name}'`)
      const family = families.get(name) ?? { name, type: 'untyped' as MetricType, help: '', unit: '', samples: [] }
      families.set(name, family)
      if (keyword === 'TYPE') {
        if (!TYPES.has(rest)) throw new ExpositionError(number, `unknown type '${rest}'`)
        if (family.samples.length > 0 || typedFamilies.has(name))
          throw new ExpositionError(number, `# TYPE for ${name} repeated or after its samples`)
        typedFamilies.add(name)
        family.type = rest as MetricType
      } else if (keyword === 'HELP') {
        family.help = unescape(rest, false, number)
      } else {
        family.unit = rest
      }
      return
    }
    const sample = parseSample(line, number)
    const family = familyOf(sample.name, families, typedFamilies)
    if (!family) throw new ExpositionError(number, `sample ${sample.name} has no # TYPE before it`)
    if (family.type === 'histogram' && sample.name.endsWith('_bucket') && sample.labels.le === undefined)
      throw new ExpositionError(number, `histogram bucket ${sample.name} without an le label`)
    family.samples.push(sample)
  })
  return families
}

function familyOf(
  sampleName: string,
  families: Map<string, MetricFamily>,
  typedFamilies: Set<string>,
): MetricFamily | undefined {
  for (const [name, family] of families) {
    if (!typedFamilies.has(name)) continue
    if (SUFFIXES[family.type].some((suffix) => sampleName === name + suffix)) return family
  }
  return undefined
}

function parseSample(line: string, number: number): Sample {
  const nameEnd = line.search(/[{\s]/)
  if (nameEnd <= 0) throw new ExpositionError(number, `not a sample: '${line}'`)
  const name = line.slice(0, nameEnd)
  if (!NAME.test(name)) throw new ExpositionError(number, `invalid metric name '${name}'`)
  let at = nameEnd
  const labels: Record<string, string> = {}
  if (line[at] === '{') {
    at++
    while (line[at] !== '}') {
      const eq = line.indexOf('=', at)
      if (eq < 0) throw new ExpositionError(number, 'label without =')
      const labelName = line.slice(at, eq).trim()
      if (!LABEL_NAME.test(labelName)) throw new ExpositionError(number, `invalid label name '${labelName}'`)
      if (line[eq + 1] !== '"') throw new ExpositionError(number, `label ${labelName}: value must be quoted`)
      let end = eq + 2
      while (end < line.length && line[end] !== '"') end += line[end] === '\\' ? 2 : 1
      if (end >= line.length) throw new ExpositionError(number, `label ${labelName}: unterminated value`)
      if (labelName in labels) throw new ExpositionError(number, `label ${labelName} repeated`)
      labels[labelName] = unescape(line.slice(eq + 2, end), true, number)
      at = end + 1
      if (line[at] === ',') at++
      else if (line[at] !== '}') throw new ExpositionError(number, `expected , or } after label ${labelName}`)
    }
    at++
  }
  const fields = line.slice(at).trim().split(/\s+/)
  if (fields.length < 1 || fields.length > 2 || fields[0] === '')
    throw new ExpositionError(number, `expected a value and an optional timestamp: '${line}'`)
  const value = parseValue(fields[0]!, number)
  if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1]))
    throw new ExpositionError(number, `invalid timestamp '${fields[1]}'`)
  return { name, labels, value }
}

function parseValue(text: string, number: number): number {
  if (text === '+Inf' || text === 'Inf') return Infinity
  if (text === '-Inf') return -Infinity
  if (text === 'NaN') return NaN
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text))
    throw new ExpositionError(number, `invalid value '${text}'`)
  return Number(text)
}

function unescape(text: string, quotes: boolean, number: number): string {
  return text.replace(/\\(.)/g, (_, char: string) => {
    if (char === 'n') return '\n'
    if (char === '\\') return '\\'
    if (char === '"' && quotes) return '"'
    throw new ExpositionError(number, `invalid escape \\${char}`)
  })
}
