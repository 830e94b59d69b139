import { fallbackValid } from '../entry.js'
import { Deadlines } from '../deadlines.js'
import { LoaderTimeoutError } from '../errors.js'
import type { Flight } from '../memory/single-flight.js'
import type { Answers } from './answers.js'
import type { Call, FlightNotes, Resolution } from './call.js'
import type { CacheCore } from './core.js'

/** Tells a caller to run its own loader, storing nothing. */
const OWN_LOAD: Resolution = { value: undefined, outcome: 'loaded', shareable: false }

type CacheFlight = Flight<Resolution, FlightNotes>

/** A caller's deadline: it answers, throws, or returns undefined to keep waiting (`again(ms)`: come back later). */
type Deadline = [ms: number, onDeadline: (again: (ms: number) => void) => Resolution | Promise<Resolution> | undefined]

/** Each caller's own softTimeout / hardTimeout / waitTimeout, raced against the flight it is on. */
export class CallerTimeouts {
  constructor(
    private readonly core: CacheCore,
    private readonly answers: Answers,
  ) {}

  /**
   * This caller's softTimeout and hardTimeout, raced against the flight (leading or
   * waiting alike), and for a caller that joined another caller's flight, waitTimeout.
   * The flight runs on, so a process still loads each key once.
   */
  withTimeouts(call: Call, flight: CacheFlight, joined: boolean): Promise<Resolution> {
    const { policy } = call
    if (!joined && !policy.softTimeout && !policy.hardTimeout) return flight.promise // no deadline, no timer
    const deadlines = this.deadlinesFor(call, flight, joined)
    return deadlines.length === 0 ? flight.promise : this.race(flight, deadlines)
  }

  private deadlinesFor(call: Call, flight: CacheFlight, joined: boolean): Deadline[] {
    const { key, policy } = call
    const { core } = this
    const fallback = () => (fallbackValid(flight.notes.fallback, performance.now()) ? flight.notes.fallback : undefined)
    const deadlines: Deadline[] = []
    if (policy.softTimeout) {
      deadlines.push([
        policy.softTimeout,
        () => {
          const stale = fallback()
          if (!stale) return undefined // nothing to answer with yet
          core.events.emit('timeout', { key, kind: 'soft' })
          return core.stale(key, stale, 'soft-timeout')
        },
      ])
    }
    if (joined) {
      deadlines.push([
        policy.waitTimeout,
        (again) => {
          // A flight still on its first Redis lookup (queued behind a burst, or sent) is not yet
          // waiting for anyone's load: count the wait again from when the lookup answers.
          const lookup = flight.notes.lookingUp
          if (lookup) {
            const resume = () => again(policy.waitTimeout)
            if (lookup === true) flight.notes.lookingUp = [resume]
            else lookup.push(resume)
            return undefined
          }
          // Run our own loader (fly() does, on this unshared marker); the flight still stores its result.
          return this.answers.waitTimedOut(call, fallback()) ?? OWN_LOAD
        },
      ])
    }
    if (policy.hardTimeout) {
      deadlines.push([
        policy.hardTimeout,
        () => {
          core.events.emit('timeout', { key, kind: 'hard' })
          const stale = fallback()
          if (stale) return core.stale(key, stale, 'hard-timeout')
          throw new LoaderTimeoutError(key, policy.hardTimeout)
        },
      ])
    }
    return deadlines
  }

  /** The flight's answer, or the first deadline's, whichever comes first. */
  private race(flight: CacheFlight, deadlines: Deadline[]): Promise<Resolution> {
    const schedule = this.deadlinesOf(flight)
    return new Promise<Resolution>((resolve, reject) => {
      let done = false
      const settle = (answer: () => void) => {
        if (done) return
        done = true
        answer()
      }
      const now = performance.now()
      for (const [ms, onDeadline] of deadlines) {
        const fire = () => {
          if (done) return // answered already; the entry just comes due
          try {
            const answer = onDeadline((later) => schedule.add(performance.now() + later, fire))
            if (answer) settle(() => resolve(answer))
          } catch (error) {
            settle(() => reject(error))
          }
        }
        schedule.add(now + ms, fire)
      }
      flight.promise.then(
        (resolution) => settle(() => resolve(resolution)),
        (error: unknown) => settle(() => reject(error)),
      )
    })
  }

  /** The flight's one timer for all its callers' deadlines, dropped when the flight settles. */
  private deadlinesOf(flight: CacheFlight): Deadlines {
    if (!flight.notes.deadlines) {
      const schedule = (flight.notes.deadlines = new Deadlines())
      flight.promise.then(
        () => schedule.clear(),
        () => schedule.clear(),
      )
    }
    return flight.notes.deadlines
  }
}
