/**
 * Real OpenTelemetry SDKs with in-memory exporters, for asserting what instrumentation
 * reported: a MeterProvider read on demand and a TracerProvider whose ended spans are kept.
 *
 * Parenting across awaits needs a context manager; an application gets one from its SDK
 * setup (sdk-node registers AsyncLocalStorage). The tests register this minimal one on
 * AsyncLocalStorage, once per test process.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { context, ROOT_CONTEXT, type Attributes, type Context, type ContextManager } from '@opentelemetry/api'
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base'

class AsyncLocalStorageContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>()
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args))
  }
  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target
    const run = (...args: unknown[]) => this.with(ctx, () => (target as (...a: unknown[]) => unknown)(...args))
    return run as T
  }
  enable(): this {
    return this
  }
  disable(): this {
    this.storage.disable()
    return this
  }
}

let registered = false
/** Registers the context manager for this test process (idempotent). */
export function enableContext(): void {
  if (registered) return
  registered = context.setGlobalContextManager(new AsyncLocalStorageContextManager())
  if (!registered) throw new Error('another global context manager is already registered')
}

export interface MetricsHarness {
  provider: MeterProvider
  /** Collects now and returns every metric by name (cumulative). */
  collect(): Promise<Map<string, MetricData>>
  shutdown(): Promise<void>
}

export function metricsHarness(): MetricsHarness {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  // The interval never fires in a test: every read is an explicit forceFlush.
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  const provider = new MeterProvider({ readers: [reader] })
  return {
    provider,
    async collect() {
      exporter.reset()
      await reader.forceFlush()
      const byName = new Map<string, MetricData>()
      for (const resource of exporter.getMetrics())
        for (const scope of resource.scopeMetrics)
          for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric)
      return byName
    },
    shutdown: () => provider.shutdown(),
  }
}

/** The value of the data point whose attributes include `match` (all of its pairs); 0 when there is none. */
export function valueOf(metrics: Map<string, MetricData>, name: string, match: Attributes = {}): number {
  const point = pointOf(metrics, name, match)
  return typeof point?.value === 'number' ? point.value : 0
}

/** The histogram count of the data point matching `match`; 0 when there is none. */
export function countOf(metrics: Map<string, MetricData>, name: string, match: Attributes = {}): number {
  return (pointOf(metrics, name, match)?.value as Histogram | undefined)?.count ?? 0
}

export function pointOf(
  metrics: Map<string, MetricData>,
  name: string,
  match: Attributes = {},
): DataPoint<unknown> | undefined {
  const metric = metrics.get(name)
  if (!metric) return undefined
  const points = (metric.dataPoints as DataPoint<unknown>[]).filter((point) =>
    Object.entries(match).every(([k, v]) => point.attributes[k] === v),
  )
  if (points.length > 1)
    throw new Error(`${name}: ${points.length} data points match ${JSON.stringify(match)}; be more specific`)
  return points[0]
}

/** Every data point's attributes of one metric (to check what is, and is not, reported). */
export function attributesOf(metrics: Map<string, MetricData>, name: string): Attributes[] {
  return ((metrics.get(name)?.dataPoints ?? []) as DataPoint<unknown>[]).map((point) => point.attributes)
}

export interface TracesHarness {
  provider: BasicTracerProvider
  spans(): ReadableSpan[]
  shutdown(): Promise<void>
}

export function tracesHarness(): TracesHarness {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  return { provider, spans: () => exporter.getFinishedSpans(), shutdown: () => provider.shutdown() }
}
