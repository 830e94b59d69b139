import { fallbackValid } from '../entry.js'
import { Deadlines } from '../deadlines.js'
import { LoaderTimeoutError } from '../errors.js'
import type { Flight } from '../memory/single-flight.js'
import type { Call, FlightNotes, Resolution } from './call.js'
import { Answers } from './answers.js'

/** Tells a caller to run its own loader, storing nothing. */
const OWN_LOAD: Resolution = { value: undefined, outcome: 'loaded', shareable: false }

/** Each caller's own softTimeout / hardTimeout / waitTimeout, raced against the flight it is on. */
export abstract class CallerTimeouts extends Answers {
  /**
   * This caller's softTimeout and hardTimeout, raced against the flight (leading or
   * waiting alike), and for a caller that joined another caller's flight, waitTimeout.
   * The flight runs on, so a process still loads each key once.
   */
  protected withTimeouts(call: Call, flight: Flight<Resolution, FlightNotes>, joined: boolean): Promise<Resolution> {
    const { key, policy } = call
    if (!joined && !policy.softTimeout && !policy.hardTimeout) return flight.promise // no deadline, no timer
    const fallback = () => (fallbackValid(flight.notes.fallback, performance.now()) ? flight.notes.fallback : undefined)
    // Each deadline answers, throws, or returns undefined to keep waiting (`again(ms)`: come back later).
    const deadlines: [number, (again: (ms: number) => void) => Resolution | Promise<Resolution> | undefined][] = []
    if (policy.softTimeout) {
      deadlines.push([
        policy.softTimeout,
        () => {
          const stale = fallback()
          if (!stale) return undefined // nothing to answer with yet
          this.events.emit('timeout', { key, kind: 'soft' })
          return this.stale(key, stale, 'soft-timeout')
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
          return this.waitTimedOut(call, fallback()) ?? OWN_LOAD
        },
      ])
    }
    if (policy.hardTimeout) {
      deadlines.push([
        policy.hardTimeout,
        () => {
          this.events.emit('timeout', { key, kind: 'hard' })
          const stale = fallback()
          if (stale) return this.stale(key, stale, 'hard-timeout')
          throw new LoaderTimeoutError(key, policy.hardTimeout)
        },
      ])
    }
    if (deadlines.length === 0) return flight.promise
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
  protected deadlinesOf(flight: Flight<Resolution, FlightNotes>): Deadlines {
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
