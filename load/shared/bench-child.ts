/**
 * A bench's child process (forked with forkTs) and its typed messages: `next(type)` waits,
 * bounded, for the next message of a type (and matching `match`). Errors a child reports
 * are printed as they come, so a stuck bench says why.
 */
import type { ChildProcess } from 'node:child_process'
import { forkTs } from './fork-ts.js'

type Message = { type: string }
type ErrorMessage = { type: 'error'; message: string }

export class BenchChild<ToParent extends Message, ToChild> {
  readonly proc: ChildProcess
  private readonly listeners = new Set<(m: ToParent) => void>()

  /** `timeoutMs`: how long next() waits by default, in ms. */
  constructor(
    file: string,
    env: NodeJS.ProcessEnv,
    private readonly timeoutMs = 10_000,
    /** Node flags for the child (`--cpu-prof`…), before tsx's. */
    nodeFlags: string[] = [],
  ) {
    this.proc = forkTs(file, env, nodeFlags)
    this.proc.on('message', (m: ToParent) => {
      if (m.type === 'error') console.error(`child ${this.proc.pid}: ${(m as Message as ErrorMessage).message}`)
      for (const listener of this.listeners) listener(m)
    })
  }

  send(m: ToChild): void {
    this.proc.send(m as object)
  }

  next<T extends ToParent['type']>(
    type: T,
    match: (m: Extract<ToParent, { type: T }>) => boolean = () => true,
    timeoutMs = this.timeoutMs,
  ): Promise<Extract<ToParent, { type: T }>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.listeners.delete(listener)
        reject(new Error(`child ${this.proc.pid}: no '${type}' within ${timeoutMs} ms`))
      }, timeoutMs)
      const listener = (m: ToParent) => {
        if (m.type !== type || !match(m as Extract<ToParent, { type: T }>)) return
        clearTimeout(timer)
        this.listeners.delete(listener)
        resolve(m as Extract<ToParent, { type: T }>)
      }
      this.listeners.add(listener)
    })
  }
}
