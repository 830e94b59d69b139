/**
 * The progress bar while runs are in flight (cli-progress, on stderr so that stdout
 * stays clean for the tables). Without a terminal it prints one line per run instead:
 * CI logs get a trace, not a wall of carriage returns.
 */
import cliProgress from 'cli-progress'
import type { HarnessEvents } from '../harness.js'
import { int } from '../../shared/format.js'

export interface Progress extends HarnessEvents {
  /** Hide the bar while `print` writes to the terminal, then bring it back where it was. */
  printAbove(print: () => void): void
  stop(): void
}

export function progressBar(stream: NodeJS.WriteStream = process.stderr): Progress {
  const tty = Boolean(stream.isTTY)
  let bar: cliProgress.SingleBar | undefined
  let totalMs = 0
  let doneMs = 0
  let currentDurationMs = 0
  let payload = { scenario: '', mode: '', db: '0', secs: '0', totalSecs: '0' }
  let value = 0

  const show = () => {
    if (!tty || totalMs === 0) return
    bar = new cliProgress.SingleBar(
      {
        stream,
        format: ' {bar} {percentage}% | {scenario} · {mode} | DB queries: {db} | {secs}/{totalSecs} s of traffic',
        barsize: 24,
        hideCursor: true,
        clearOnComplete: true,
      },
      cliProgress.Presets.shades_classic,
    )
    bar.start(Math.round(totalMs / 100), value, payload)
  }
  const hide = () => {
    bar?.stop()
    bar = undefined
  }
  const update = (next: Partial<typeof payload>, nextValue: number) => {
    payload = { ...payload, ...next }
    value = nextValue
    bar?.update(value, payload)
  }

  return {
    onPlan(plan) {
      totalMs = plan.totalMs
      payload.totalSecs = (totalMs / 1000).toFixed(0)
      show()
    },
    onRunStart(scenario, mode) {
      currentDurationMs = scenario.durationMs
      if (!tty)
        stream.write(`  running ${scenario.name} · ${mode} (${(scenario.durationMs / 1000).toFixed(1)} s of traffic)\n`)
      update({ scenario: scenario.name, mode, db: '0' }, Math.round(doneMs / 100))
    },
    onTick(tick) {
      const elapsed = Math.min(doneMs + tick.elapsedMs, totalMs)
      update({ db: int(tick.dbQueries), secs: (elapsed / 1000).toFixed(0) }, Math.round(elapsed / 100))
    },
    onRunEnd(_scenario, result) {
      doneMs += currentDurationMs
      update({ db: int(result.dbQueries), secs: (doneMs / 1000).toFixed(0) }, Math.round(doneMs / 100))
    },
    printAbove(print) {
      const wasShown = bar !== undefined
      hide()
      print()
      if (wasShown && doneMs < totalMs) show()
    },
    stop: hide,
  }
}
