import { randomBytes } from 'node:crypto'
import { fallbackValid } from '../entry.js'
import { CacheClosedError, RedisUnavailableError, RemoteLoaderError } from '../errors.js'
import type { WaitOutcome } from '../events.js'
import type { PolicyOptions } from '../options.js'
import type { FreshRead } from './redis/fresh-reads.js'
import { entryKeys, freshKeyOf } from './redis/keys.js'
import type { Subscription } from '../redis/notifier.js'
import type { PollWait } from '../redis/poll-scheduler.js'
import type { Lookup, LookupMode } from './redis/store.js'
import { type Call, type Claim, type FlightNotes, type Resolution, messageKind } from './call.js'
import { CallerTimeouts } from './timeouts.js'

/** The flight's first lookup answered (or failed): from now on its joined callers' waitTimeouts run. */
function lookedUp(notes: FlightNotes): void {
  const postponed = notes.lookingUp
  notes.lookingUp = false
  if (Array.isArray(postponed)) for (const resume of postponed) resume()
}

/** How a cross-process wait ended, by what the re-check found once the lock was no longer held. */
const WAIT_ENDED_BY_LOOKUP: Record<Exclude<Lookup['lock'], 'held'>, WaitOutcome> = {
  none: 'value',
  error: 'error',
  backoff: 'error',
  won: 'released',
  pass: 'released',
  token: 'released',
}
/** How a cross-process wait ended, by the leader's message that answered it (commit, error, not cacheable). */
const WAIT_ENDED_BY_MESSAGE: Record<string, WaitOutcome> = { c: 'value', n: 'value', e: 'error', u: 'released' }

/**
 * The request state machine, in one place: L1 → single-flight → the fresh GET →
 * get-or-lock → hit / stale / lead / wait. Below it: each caller's own timeouts
 * (timeouts.ts), and what each answer returns (answers.ts).
 */
export abstract class RequestMachine extends CallerTimeouts {
  // ── L1 and single-flight ──────────────────────────────────────────────────

  /** A resolution straight from L1 (synchronous), or the flight's promise. */
  protected lookup(key: string, loader: unknown, options: PolicyOptions | undefined): Resolution | Promise<Resolution> {
    let call: Call
    try {
      call = this.call(key, loader, options)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.serveFromMemory(call) ?? this.fly(call)
  }

  protected serveFromMemory(call: Call): Resolution | undefined {
    const entry = this.memory?.get(call.key)
    if (!entry) return undefined
    const now = performance.now()
    if (now < entry.freshUntil) {
      if (this.dueForEarlyRefresh(call, entry, now)) this.refreshInBackground(call, 'refresh', entry)
      if (this.events.count('hit')) this.events.deliver('hit', { key: call.key, tier: 'l1' }) // no payload made for nobody: every L1 hit
      return { value: entry.value, outcome: 'hit', shareable: true }
    }
    if (now < entry.backoffUntil && now < entry.fallbackUntil) return this.stale(call.key, entry, 'backoff')
    if (now < entry.graceUntil) {
      // With Redis, the first call past ttl asks it first (resolve(): one GET while another
      // process's reload is already in): stale is served only while a reload is running, our
      // own (a refresh or load here) or another process's that we watch for (watchReload).
      if (this.store && !this.reloading(call.key, now)) return undefined
      this.refreshInBackground(call, 'read', entry)
      return this.stale(call.key, entry, 'grace')
    }
    return undefined
  }

  /** Is a reload of `key` under way that this process knows of (so a copy in grace may be served)? */
  protected reloading(key: string, now: number): boolean {
    return now < (this.refreshHolds.get(key) ?? 0) && (this.busy(key) || this.watching.has(key))
  }

  protected fly(call: Call): Promise<Resolution> {
    const running = this.flights.get(call.key)
    if (!running)
      return this.withTimeouts(
        call,
        this.flights.start(call.key, { fallback: undefined }, (notes) => this.resolve(call, notes)),
        false,
      )
    const startedAt = performance.now()
    this.events.emit('coalesced', { key: call.key, from: 'process' })
    return this.withTimeouts(call, running, true).then((resolution) => {
      // Loaded before an invalidation of one of its tags: a caller may have joined after it (deleteByTag resolved). Ask again, as a call begun now.
      const under = resolution.loadedUnder
      if (under && this.tagIndex.invalidatedSince(under.tags, under.epoch))
        return this.fly({ ...call, epoch: this.deletions })
      if (!resolution.shareable) return this.loadUncached(call, startedAt)
      return resolution.outcome === 'loaded' ? { ...resolution, outcome: 'coalesced' } : resolution
    })
  }

  // ── the Redis state machine ───────────────────────────────────────────────

  /**
   * One flight: decide from Redis who loads, then lead, wait, or serve. The fresh hit comes
   * first and takes no await, no timer and no closure beyond its one reaction (it is most
   * calls' whole path): the GET is sent in this tick's batch, and only when it finds nothing
   * (or fails) does the flight go on to the script in lookUp().
   */
  protected override resolve(call: Call, notes: FlightNotes): Promise<Resolution> {
    if (this.memory) {
      const inMemory = this.memory.get(call.key)
      if (fallbackValid(inMemory, performance.now())) notes.fallback = inMemory
    }
    const store = this.store
    if (!store) {
      this.events.emit('miss', { key: call.key }) // in-process mode: L1 was the only tier
      return this.lead(call, undefined, notes)
    }
    // Whichever command goes first is sent before this returns, so calls keep their order.
    if (store.clock.stale()) void store.syncClock()
    // The first lookup is the fresh GET and, when it finds nothing, the script: joined
    // callers' waitTimeouts start once it answers (see withTimeouts in timeouts.ts).
    notes.lookingUp ??= true
    if (!store.clock.known()) return this.lookUp(call, notes, undefined)
    const machine = this // methods, not arrow properties: tsx names each arrow property it creates, per call
    return new Promise<Resolution>((resolve, reject) =>
      store.readFresh({
        freshKey: freshKeyOf(this.settings.namespace, call.key),
        found(found) {
          try {
            resolve(machine.freshHit(call, found, store) ?? machine.lookUp(call, notes, undefined))
          } catch (error) {
            reject(error)
          }
        },
        failed(error) {
          resolve(machine.lookUp(call, notes, Promise.reject(error)))
        },
      }),
    )
  }

  /**
   * The flight after its fresh read: the get-or-lock script and what it answers. `failedRead`:
   * the fresh read, which failed (through a failover it is tried again first).
   */
  protected async lookUp(
    call: Call,
    notes: FlightNotes,
    failedRead: Promise<FreshRead> | undefined,
  ): Promise<Resolution> {
    const { key } = call
    const store = this.store!
    const keys = entryKeys(this.settings.namespace, key)
    let waitingSince: number | undefined // set from the `wait` event until the `waited` one
    const waited = (outcome: WaitOutcome) => {
      if (waitingSince === undefined) return
      this.events.emit('waited', { key, durationMs: performance.now() - waitingSince, outcome })
      waitingSince = undefined
    }
    let handedOff = false // past this point a RedisUnavailableError is the loader's own
    let subscription: Subscription | undefined
    let wait: PollWait | undefined // this flight's place in the poll scheduler, while it waits
    let counted = false // it holds one of the maxWaits
    // The wait is over (the lock came free, the wait ran out, a message answered): give its
    // place in maxWaits and the poll scheduler back now, not after a load that follows it,
    // or loads after waits count as waits and cap the waits of other keys.
    const endWait = () => {
      wait?.end()
      wait = undefined
      subscription?.release()
      subscription = undefined
      if (counted) this.waitsOpen--
      counted = false
    }
    let owner = '' // set after the fresh read: a hit needs none
    // A lookup of `owner` got no answer: it may take the lock yet. Undone once the flight is done with `owner`.
    let abandoned = false
    let won = false
    // This process's last load of the key is still trying to commit: the failover is waited out for it, as a waiter would.
    const committing = this.committing.has(key)
    const failoverDeadline = performance.now() + call.policy.waitTimeout
    const { lease, pollInterval, maxPollInterval } = this.settings.lock
    try {
      if (failedRead) {
        // Through a failover as the script is (redisFailoverWait): else every process would load.
        let first: Promise<FreshRead> | undefined = failedRead // attempt 0, already made
        const read = () => {
          const sent = first
          first = undefined
          return sent ? sent.then((found) => this.freshEntry(key, found, store)) : this.readFresh(key, keys, store)
        }
        const fresh = await store
          .throughFailover(read, failoverDeadline, pollInterval, { key: keys.entry, patient: committing })
          .catch((error: unknown) => {
            lookedUp(notes)
            throw error
          })
        if (fresh) return this.hit(call, fresh)
      }
      owner = randomBytes(16).toString('hex')
      let mode: LookupMode = 'read'
      let waitDeadline = 0
      /** Not waiting (the wait ran out, or was not allowed): stale if we can, else onWaitTimeout. */
      const giveUp = async (capped: boolean): Promise<Resolution> => {
        endWait()
        const timedOut = this.waitTimedOut(call, notes.fallback, capped)
        if (timedOut) return timedOut
        // Load without the lock; a fresh token still fences the result against newer ones.
        const {
          lockArg: token,
          serverNow,
          fence,
        } = await store.getOrLock(keys, owner, lease, 'token', this.retentionMs)
        notes.fallback = this.unlessDeleted(key, notes.fallback, fence)
        handedOff = true
        return await this.lead(call, { keys, token, lockValue: '', lockedAt: 0, serverAt: serverNow }, notes)
      }
      /**
       * close() was called: the wait ends now rather than at waitTimeout (a closing process must
       * not hang on another's load). A stale copy still serves; else CacheClosedError, not
       * onWaitTimeout: 'load' would start new work close() then waits for, 'throw' would misname it.
       */
      const closedWait = (): Resolution => {
        endWait()
        if (!fallbackValid(notes.fallback, performance.now())) throw new CacheClosedError()
        waited('timeout')
        return this.stale(key, notes.fallback, 'wait-timeout')
      }
      for (;;) {
        notes.lookingUp ??= true
        // A waiter's re-check (waitDeadline set) retries until its wait ends, not just redisFailoverWait.
        // The lease runs from the attempt that took the lock (found.sentAt), not from the first of a failover's retries.
        const found = await store
          .throughFailover(
            () => store.getOrLock(keys, owner, lease, mode, this.retentionMs, -1, () => (abandoned = true)),
            waitDeadline || failoverDeadline,
            pollInterval,
            { key: keys.entry, patient: committing || waitDeadline > 0 },
          )
          .finally(() => lookedUp(notes))
        const entry = this.decode(key, found)
        notes.fallback = entry ?? this.unlessDeleted(key, notes.fallback, found.fence)
        if (found.lock !== 'held') waited(WAIT_ENDED_BY_LOOKUP[found.lock])
        switch (found.lock) {
          case 'none': // fresh
            if (!entry) {
              mode = 'refresh' // corrupt data: take the lock and overwrite it
              continue
            }
            return this.hit(call, entry)
          case 'backoff':
            if (!entry) return this.loadUncached(call)
            entry.backoffUntil = performance.now() + Number(found.lockArg)
            this.remember(call, entry)
            return this.stale(key, entry, 'backoff')
          case 'pass':
            return this.loadUncached(call)
          case 'error':
            return this.remoteFailure(call, found.data.toString(), notes.fallback)
          case 'token':
            throw new Error(`unexpected lookup ${found.lock} in mode ${mode}`)
          case 'won': {
            won = true // the lock is the lead's to commit or release
            this.checkReplicated(key, found)
            const claim: Claim = {
              keys,
              token: found.lockArg,
              lockValue: `${owner}:${found.lockArg}`,
              lockedAt: found.sentAt,
              serverAt: found.serverNow,
            }
            const stale = this.graceCopy(entry, found, notes)
            if (stale) {
              this.remember(call, stale)
              if (this.refreshing >= this.settings.maxBackgroundRefreshes) {
                // Too many refreshes running here: give the lock back (waiters re-check) and serve stale.
                await store.release(keys, claim.lockValue, 'r|').catch(() => {})
                return this.stale(key, stale, 'grace')
              }
              this.holdRefresh(key, performance.now() + lease) // we are the one refreshing it
              this.leadInBackground({ ...call, background: true }, claim, { fallback: stale })
              return this.stale(key, stale, 'grace')
            }
            this.events.emit('miss', { key })
            handedOff = true
            endWait() // a wait that ends in taking the lock is over: the load is not one
            return await this.lead(call, claim, notes)
          }
          case 'held': {
            const pttl = Number(found.lockArg)
            const stale = this.graceCopy(entry, found, notes)
            if (stale) {
              waited('value')
              this.remember(call, stale)
              this.watchReload(call, keys, stale, pttl) // another process is refreshing it
              return this.stale(key, stale, 'grace')
            }
            if (this.closed) return closedWait()
            // Subscribe first, then re-check, so the leader's commit message cannot
            // fall between our check and our subscription.
            if (!subscription) {
              if (!counted && this.waitsOpen >= this.settings.maxWaits) {
                this.events.emit('wait-capped', { key, waits: this.waitsOpen })
                return await giveUp(true)
              }
              if (!counted) this.waitsOpen++
              counted = true
              this.events.emit('wait', { key })
              waitingSince = performance.now()
              subscription = await store.throughFailover(
                () => this.notifier!.subscribe(keys.channel),
                failoverDeadline,
                pollInterval,
                { key: keys.entry, patient: true },
              )
              waitDeadline = performance.now() + call.policy.waitTimeout
              wait = this.polls!.enrol(keys.lock, waitDeadline, { firstMs: pollInterval, maxMs: maxPollInterval })
              continue
            }
            if (wait!.over) {
              waited('timeout')
              return await giveUp(false)
            }
            // Until the leader's message, a poll finding the lock gone (or failing), or the deadline.
            const message = await wait!.pause(subscription!, pttl)
            if (message === undefined && this.closed) return closedWait() // close() woke it (see PollScheduler.interruptAll)
            if (message !== undefined && messageKind(message) === 'u') endWait() // loads uncached: no longer a wait
            const answer =
              message === undefined ? undefined : await this.onLeaderMessage(call, keys, message, notes.fallback)
            if (answer) {
              waited(WAIT_ENDED_BY_MESSAGE[messageKind(message!)] ?? 'released')
              return answer
            }
            continue // no news, or the lock was released without a value: re-check
          }
        }
      }
    } catch (error) {
      waited(error instanceof RemoteLoaderError ? 'error' : 'failed')
      if (handedOff || !(error instanceof RedisUnavailableError)) throw error
      // An L1 entry waiting to be checked (see suspectAll) serves on, as it did before Redis failed.
      const trusted = this.memory?.trustAgain(key)
      const copy = trusted ?? notes.fallback
      // Redis is unreachable, so every process would reload on its own: while a copy may still be
      // served (fresh or in grace), serve it, and spare the database that herd for a breaker's openFor.
      const servable = copy !== undefined && performance.now() < copy.graceUntil
      if (servable) this.holdRefresh(key, performance.now() + this.settings.breaker.openFor)
      const served = trusted && this.serveFromMemory(call)
      if (served) return served
      if (servable) return this.stale(key, copy, 'grace')
      return this.lead(call, undefined, notes)
    } finally {
      endWait()
      if (abandoned && !won) store.releaseAbandoned(keys, owner)
    }
  }
}
