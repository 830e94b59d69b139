/**
 * OpenTelemetry's `Meter` and `Tracer` as `instrument()`'s options name them: by shape,
 * so this package's `.d.ts` never import `@opentelemetry/api` (an optional peer). The
 * instrumentation itself works on the API's own types; a real Meter or Tracer (from any
 * 1.x API) fits, and anything else is refused at run time with an `InvalidArgumentError`.
 */

/** An OpenTelemetry `Meter` (`meterProvider.getMeter(…)`). */
export interface MeterLike {
  // Parameters are `never[]`: the API's own signatures fit.
  createCounter(...args: never[]): unknown
  createHistogram(...args: never[]): unknown
  addBatchObservableCallback(...args: never[]): unknown
}

/** An OpenTelemetry `Tracer` (`tracerProvider.getTracer(…)`). */
export interface TracerLike {
  startSpan(...args: never[]): unknown
}
