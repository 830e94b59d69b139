/**
 * The Redis commands one store has sent and not yet seen answered, each with its deadline,
 * on ONE timer. A timer per command cost every fresh hit a `setTimeout`, an `unref` and a
 * `clearTimeout`; here a command is a node in a list. Commands share one timeout, so their
 * deadlines rise in the order they were sent: the earliest is always the list's head, and
 * one timer armed for it serves them all (re-armed lazily, when it fires, for the new head).
 */
export class InFlight {
  /** performance.now() ms after which it is declared timed out. */
  deadline = 0
  prev: InFlight | undefined = undefined
  next: InFlight | undefined = undefined
  /** Answered, failed or timed out: whatever comes later is ignored. */
  settled = false
}

export class InFlightList<C extends InFlight> {
  private head: C | undefined
  private tail: C | undefined
  private timer: NodeJS.Timeout | undefined

  constructor(
    readonly timeoutMs: number,
    /** Fails a command that timed out (called once, after it was settled here). */
    private readonly timedOut: (command: C) => void,
  ) {}

  /** Starts `command`'s deadline: now + the timeout. */
  add(command: C): void {
    command.deadline = performance.now() + this.timeoutMs
    command.prev = this.tail
    command.next = undefined
    if (this.tail) this.tail.next = command
    else this.head = command
    this.tail = command
    if (!this.timer) this.arm(this.timeoutMs)
  }

  /** Marks it settled and takes it off the list; false if it had settled already. */
  settle(command: C): boolean {
    if (command.settled) return false
    command.settled = true
    const { prev, next } = command
    if (prev) prev.next = next
    else if (this.head === command) this.head = next as C | undefined
    if (next) next.prev = prev
    else if (this.tail === command) this.tail = prev as C | undefined
    command.prev = command.next = undefined
    return true
  }

  /** Fails every command in flight (the connection dropped: their replies would never come). */
  failAll(fail: (command: C) => void): void {
    for (let command = this.head; command; command = this.head) {
      if (this.settle(command)) fail(command)
    }
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.expire(), Math.max(1, Math.ceil(ms)))
    this.timer.unref()
  }

  private expire(): void {
    this.timer = undefined
    // Node timers count whole milliseconds: allow 1 ms so a due deadline is not re-armed for nothing.
    const now = performance.now() + 1
    const due: C[] = []
    for (let command = this.head; command && command.deadline <= now; command = command.next as C | undefined)
      due.push(command)
    if (due.length > 0) {
      // Declared timed out only after the event loop has read what already arrived (setImmediate
      // runs after the I/O phase): a busy loop delays replies, it does not lose them.
      setImmediate(() => {
        for (const command of due) if (this.settle(command)) this.timedOut(command)
      })
    }
    const next = due.length > 0 ? due[due.length - 1]!.next : this.head
    if (next) this.arm(next.deadline - performance.now())
  }
}

/** A command as the store sends it: what it answered goes to `answered`, a failure (after the breaker's accounting) to `failed`. */
export abstract class Dispatch<T> extends InFlight {
  constructor(
    readonly operation: string,
    /** A retry through a failover: not counted by the breaker. */
    readonly retry: boolean,
  ) {
    super()
  }
  /** A key the command touches, for the failing clock (on a Cluster: its master's); none for a batch of reads. */
  key: string | undefined = undefined
  /** Sends the command (once). */
  abstract send(): Promise<T>
  abstract answered(value: T): void
  abstract failed(error: Error): void
  /** An error that is an answer all the same (then what it means), not a failure: none by default. */
  recovers(_error: unknown): T | undefined {
    return undefined
  }
}

/** Sends `dispatch` (see RedisStore.dispatch). */
export type Dispatcher = <T>(dispatch: Dispatch<T>) => void
