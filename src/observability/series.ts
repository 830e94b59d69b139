import type {
  Attributes,
  BatchObservableResult,
  Meter,
  MetricOptions,
  ObservableCounter,
  ObservableGauge,
} from '@opentelemetry/api'
import { ATTR } from './names.js'

/** @internal One attribute set of an instrument, built once, with its running count. */
export interface Series {
  readonly attributes: Attributes
  count: number
}

/**
 * The attribute sets of one instrument, each built on first use and then reused, so an
 * event allocates nothing. Counters are tallied here and read by an observable callback
 * when the SDK collects: an event on the hit path costs one map lookup and one increment,
 * never a call into the SDK.
 *
 * Bounded: `variant` comes from a fixed set (a tier, a stale reason, a bounded error
 * type) and `label` from the bounded key labeler, so the set holds at most
 * variants × (labels + 1) series.
 * @internal
 */
export class SeriesSet {
  private readonly unlabeled = new Map<string, Series>()
  /** label → variant → series: two lookups instead of building a `variant+label` string per event. */
  private readonly labeled = new Map<string, Map<string, Series>>()

  constructor(
    private readonly common: Attributes,
    private readonly attributesOf: (variant: string) => Attributes,
  ) {}

  get(variant: string, label?: string): Series {
    let byVariant = this.unlabeled
    if (label !== undefined) {
      byVariant = this.labeled.get(label) ?? new Map<string, Series>()
      if (byVariant.size === 0) this.labeled.set(label, byVariant)
    }
    let series = byVariant.get(variant)
    if (!series) {
      const attributes = { ...this.common, ...this.attributesOf(variant) }
      if (label !== undefined) attributes[ATTR.keyLabel] = label
      series = { attributes, count: 0 }
      byVariant.set(variant, series)
    }
    return series
  }

  *values(): IterableIterator<Series> {
    yield* this.unlabeled.values()
    for (const byVariant of this.labeled.values()) yield* byVariant.values()
  }
}

/** @internal */
export const NO_ATTRIBUTES = (): Attributes => ({})

/**
 * Observable counters tallied in series sets, plus gauges read from a function, all
 * reported by one batch callback when the SDK collects.
 * @internal
 */
export class ObservedInstruments {
  private readonly counters: [ObservableCounter, SeriesSet][] = []
  private readonly gauges: [ObservableGauge, () => number][] = []

  constructor(
    private readonly meter: Meter,
    private readonly common: Attributes,
  ) {}

  /** A counter; bump a series of the returned set to count. */
  counter(
    name: string,
    options: MetricOptions,
    attributesOf: (variant: string) => Attributes = NO_ATTRIBUTES,
  ): SeriesSet {
    const series = new SeriesSet(this.common, attributesOf)
    this.counters.push([this.meter.createObservableCounter(name, options), series])
    return series
  }

  gauge(name: string, options: MetricOptions, read: () => number): void {
    this.gauges.push([this.meter.createObservableGauge(name, options), read])
  }

  /** Starts reporting; returns the function that stops it. */
  start(): () => void {
    const observe = (result: BatchObservableResult) => {
      for (const [counter, series] of this.counters)
        for (const { count, attributes } of series.values()) result.observe(counter, count, attributes)
      for (const [gauge, read] of this.gauges) result.observe(gauge, read(), this.common)
    }
    const instruments = [...this.counters.map(([counter]) => counter), ...this.gauges.map(([gauge]) => gauge)]
    this.meter.addBatchObservableCallback(observe, instruments)
    return () => this.meter.removeBatchObservableCallback(observe, instruments)
  }
}
