/**
 * Writes a run's artifacts under load/results/ (git-ignored): the JSON results and one
 * SVG chart per scenario, all sharing the run's timestamp.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { LoadResults } from '../results.js'
import { renderSvgChart } from './svg-chart.js'

export const RESULTS_DIR = fileURLToPath(new URL('../../results/', import.meta.url))

/** 2025-01-31T12-34-56 — sortable, and safe in a file name on every OS. */
export function timestampForFile(iso: string): string {
  return iso.replace(/\.\d+Z$/, '').replace(/:/g, '-')
}

export async function writeResults(results: LoadResults, dir = RESULTS_DIR): Promise<{ json: string; svgs: string[] }> {
  await mkdir(dir, { recursive: true })
  const stamp = timestampForFile(results.startedAt)
  const json = path.join(dir, `${stamp}.json`)
  await writeFile(json, JSON.stringify(results, null, 2) + '\n')
  const subtitle =
    `${results.settings.workers} workers · ${results.settings.database.split(' (')[0]} at ` +
    `${results.settings.dbLatencyMs} ms/query · ${results.machine.cpus} × ${results.machine.cpuModel}`
  const svgs: string[] = []
  for (const scenario of results.scenarios) {
    if (scenario.modes.length === 0) continue
    const file = path.join(dir, `${stamp}-${scenario.name}.svg`)
    await writeFile(file, await renderSvgChart(scenario, subtitle))
    svgs.push(file)
  }
  return { json, svgs }
}
