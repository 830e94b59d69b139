/**
 * instrumentLocks(): the lock front (createLocks/withLock) is not on this branch yet, so
 * these tests drive the documented LockEvents contract from a tiny emitter standing in
 * for it. The OpenTelemetry SDKs and exporters are the real ones.
 */
import { EventEmitter } from 'node:events'
import { SpanStatusCode, trace } from '@opentelemetry/api'
import { afterEach, describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../src/index.js'
import { instrumentLocks, type LockEventName, type LockEvents, type LockEventSource } from '../../src/observability/index.js'
import { countOf, enableContext, metricsHarness, pointOf, tracesHarness, valueOf, type MetricsHarness, type TracesHarness } from '../support/otel.js'

/** Emits LockEvents as a lock front would, and counts its listeners (to check stop()). */
class LockEventEmitter implements LockEventSource {
  private readonly emitter = new EventEmitter()
  on<E extends LockEventName>(event: E, listener: (payload: LockEvents[E]) => void): () => void {
    this.emitter.on(event, listener)
    return () => this.emitter.off(event, listener)
  }
  emit<E extends LockEventName>(event: E, payload: LockEvents[E]): void {
    this.emitter.emit(event, payload)
  }
  listeners(): number {
    return this.emitter.eventNames().reduce((sum, name) => sum + this.emitter.listenerCount(name), 0)
  }
}

describe('instrumentLocks(), driven by a stand-in for the lock front', () => {
  let metrics: MetricsHarness
  let traces: TracesHarness
  afterEach(async () => {
    await Promise.all([metrics?.shutdown(), traces?.shutdown()])
  })

  it('reports acquire waits, hold times, busy, lost and backend errors as metrics and spans', async () => {
    enableContext()
    metrics = metricsHarness()
    traces = tracesHarness()
    const locks = new LockEventEmitter()
    const instrumentation = instrumentLocks(locks, { meter: metrics.provider.getMeter('test'), tracer: traces.provider.getTracer('test'), keyLabel: (key) => key.split(':')[0] })
    const app = traces.provider.getTracer('app')

    app.startActiveSpan('job', (span) => {
      locks.emit('acquired', { key: 'order:1', backend: 'redis', waitedMs: 120 })
      locks.emit('released', { key: 'order:1', backend: 'redis', heldMs: 2_000 })
      span.end()
    })
    locks.emit('acquired', { key: 'order:2', backend: 'postgres', waitedMs: 0 })
    locks.emit('lost', { key: 'order:2', backend: 'postgres', heldMs: 5_000 })
    locks.emit('busy', { key: 'order:3', backend: 'redis', waitedMs: 1_000 })
    locks.emit('backend-error', { key: 'order:4', backend: 'redis', error: new Error('ECONNREFUSED') })

    const m = await metrics.collect()
    const redis = { 'stampede_guard.lock.backend': 'redis' }
    const postgres = { 'stampede_guard.lock.backend': 'postgres' }
    expect(valueOf(m, 'stampede_guard.lock.acquires', { ...redis, 'stampede_guard.lock.result': 'acquired' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.lock.acquires', { ...redis, 'stampede_guard.lock.result': 'busy' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.lock.acquires', { ...postgres, 'stampede_guard.lock.result': 'acquired' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.lock.lost', postgres)).toBe(1)
    expect(valueOf(m, 'stampede_guard.lock.backend_errors', redis)).toBe(1)
    expect(countOf(m, 'stampede_guard.lock.wait.duration', { ...redis, 'stampede_guard.lock.result': 'busy' })).toBe(1)
    const held = pointOf(m, 'stampede_guard.lock.hold.duration', { ...redis, 'stampede_guard.lock.end': 'released' })?.value as { sum: number; count: number }
    expect(held).toMatchObject({ count: 1, sum: 2 }) // seconds
    expect(countOf(m, 'stampede_guard.lock.hold.duration', { ...postgres, 'stampede_guard.lock.end': 'lost' })).toBe(1)
    expect(pointOf(m, 'stampede_guard.lock.lost', postgres)?.attributes['stampede_guard.key.label']).toBe('order')

    const spans = traces.spans()
    const job = spans.find((span) => span.name === 'job')!
    const acquire = spans.filter((span) => span.name === 'stampede-guard lock acquire')
    const hold = spans.filter((span) => span.name === 'stampede-guard lock hold')
    expect(acquire).toHaveLength(3)
    expect(hold).toHaveLength(2)
    expect(acquire[0]!.parentSpanContext?.spanId).toBe(job.spanContext().spanId) // emitted in the job's context
    const durationMs = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6
    expect(durationMs(acquire[0]!.duration)).toBeCloseTo(120, 0)
    expect(acquire.find((span) => span.attributes['stampede_guard.lock.result'] === 'busy')!.status.code).toBe(SpanStatusCode.ERROR)
    expect(hold.find((span) => span.attributes['stampede_guard.lock.end'] === 'lost')!.attributes['error.type']).toBe('lost')
    for (const span of spans) expect(JSON.stringify(span.attributes)).not.toMatch(/order:\d/)

    expect(locks.listeners()).toBeGreaterThan(0)
    instrumentation.stop()
    expect(locks.listeners()).toBe(0)
    expect(trace.getActiveSpan()).toBeUndefined()
  })

  it('rejects a source without on()', () => {
    metrics = metricsHarness()
    expect(() => instrumentLocks({} as never, { meter: false, tracer: false })).toThrow(InvalidArgumentError)
  })
})
