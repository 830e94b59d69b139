import {
  context,
  isSpanContextValid,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
  type SpanOptions,
  type Tracer,
} from '@opentelemetry/api'
import type { LoaderContext } from '../context.js'
import type { LoadScope } from '../cache/load-scope.js'
import { ATTR, SPAN } from './names.js'

/** Now, in epoch ms with sub-ms precision (what `startTime` / `end()` accept as a number). */
const epochMs = () => performance.timeOrigin + performance.now()

/** @internal Marks a span failed, the semconv way: status ERROR and `error.type`. */
export function markFailed(span: Span, errorType: string, error?: unknown): void {
  span.setAttribute(ATTR.errorType, errorType)
  span.setStatus({ code: SpanStatusCode.ERROR, ...(error instanceof Error ? { message: error.message } : {}) })
  if (error instanceof Error) span.recordException(error)
}

/**
 * A span for something that just ended after `durationMs` (a wait, a lock hold), as a
 * child of the active span: that is the caller's, since the event that reports it is
 * emitted in the caller's async context.
 * @internal
 */
export function recordEndedSpan(
  tracer: Tracer,
  name: string,
  durationMs: number,
  attributes: Attributes,
  errorType?: string,
): void {
  const end = epochMs()
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: end - durationMs, attributes })
  if (errorType !== undefined) markFailed(span, errorType)
  span.end(end)
}

/**
 * The load span: it wraps the loader call, so spans the loader opens are its children.
 * A foreground load is a child of the caller's active span. A background refresh (grace,
 * early refresh) outlives the request that triggered it, so it starts a trace of its own,
 * linked to that request's span.
 * @internal
 */
export function tracingLoadScope(
  tracer: Tracer,
  common: Attributes,
  labelOf: ((key: string) => string) | undefined,
  errorTypeOf: (error: unknown) => string,
): LoadScope {
  return (loader: LoaderContext<unknown>, run: () => unknown) => {
    const active = context.active()
    const attributes: Attributes = {
      ...common,
      [ATTR.loadBackground]: loader.background,
      [ATTR.loadUncached]: loader.uncached,
    }
    if (labelOf) attributes[ATTR.keyLabel] = labelOf(loader.key)
    const options: SpanOptions = { kind: SpanKind.INTERNAL, attributes }
    if (loader.background) {
      const caller = trace.getSpanContext(active)
      options.root = true
      if (caller && isSpanContextValid(caller)) options.links = [{ context: caller }]
    }
    const span = tracer.startSpan(SPAN.load, options, active)
    const failed = (error: unknown) => {
      markFailed(span, errorTypeOf(error), error)
      span.end()
    }
    return context.with(trace.setSpan(active, span), () => {
      let result: unknown
      try {
        result = run()
      } catch (error) {
        failed(error)
        throw error
      }
      if (!isPromiseLike(result)) {
        span.end()
        return result
      }
      return Promise.resolve(result).then(
        (value) => {
          span.end()
          return value
        },
        (error: unknown) => {
          failed(error)
          throw error
        },
      )
    })
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function'
}
