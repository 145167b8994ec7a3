// D17: http_server_request_duration_seconds, counted here and read by prom-client's registry.
//
// prom-client's Histogram does, for every observation, even on a child bound to its labels:
// a new closure, a labels object, a check of every label name, a hash of the labels built as a
// string, and a search of the buckets: a few percent of the service's busy time, when measured,
// for a figure every request adds to (docs/benchmarks.md). Here a label set's counts are one Float64Array, found by a Map
// look-up on a short string key; an observation is a bucket search over 14 numbers and two
// additions.
//
// The registry reads it as it reads its own metrics: `get()` gives the histogram's samples in
// prom-client's shape (the `_bucket` series cumulative, with `le`, then `_sum` and `_count`), so
// the text exposition, the default labels and the cluster's aggregation (summed across workers)
// are prom-client's own.
//
// That is the one part of prom-client this relies on beyond its documented API, fenced in this
// module: its types admit only its own four metric classes, while its registry reads any object
// with `name`, `help`, `type`, `aggregator` and `get()` (checked on prom-client 15.1.3).
// test/request-durations.test.ts holds the scrape equal to prom-client's own Histogram's, in one
// process and across cluster workers, and fails, naming this module, when a release reads a
// metric another way. It is kept because the gain is beyond a few per cent (docs/benchmarks.md).
import type { Metric, Registry } from 'prom-client'

/** The labels of one series, OTel's HTTP server attributes (D17). */
export interface RequestLabels {
  http_request_method: string
  http_route: string
  http_response_status_code: string
}

/** One sample as prom-client's registry reads it (its MetricValue). */
interface Sample {
  labels: Record<string, string | number>
  value: number
  metricName: string
}

/** One label set: per bucket, the observations at or below its bound (not cumulative), then the sum. */
interface Series {
  labels: RequestLabels
  /** counts[i]: observations in bucket i (i = bounds.length: above the last bound); then sum. */
  counts: Float64Array
}

export interface RequestDurationsOptions {
  name: string
  help: string
  /** Upper bounds in seconds, ascending. */
  buckets: readonly number[]
  registry: Registry
}

export class RequestDurations {
  readonly name: string
  readonly help: string
  readonly type = 'histogram'
  /** Summed across cluster workers (prom-client's AggregatorRegistry). */
  readonly aggregator = 'sum'
  readonly #bounds: readonly number[]
  /**
   * The series by route, then method, then status: each look-up by a string the process already
   * holds (the route's template, the parser's method) or a number, never a key built per request
   * (docs/benchmarks.md, "Where the instructions go, by function").
   */
  readonly #byRoute = new Map<string, Map<string, Map<number, Series>>>()
  /** Every series, for a scrape. */
  readonly #series: Series[] = []

  constructor({ name, help, buckets, registry }: RequestDurationsOptions) {
    this.name = name
    this.help = help
    if (
      !buckets.every(
        (bound, i) => Number.isFinite(bound) && (i === 0 || bound > (buckets[i - 1] as number)),
      )
    ) {
      throw new Error(`${name}: the bucket bounds must be finite and ascending`)
    }
    this.#bounds = Object.freeze([...buckets])
    // The one cast: prom-client's `Metric` type is the union of its own classes (see the top).
    registry.registerMetric(this as unknown as Metric)
  }

  /** One finished request: `seconds` into the series of its method, route and status. */
  observe(method: string, route: string, status: number, seconds: number): void {
    // A duration is a difference of monotonic clock readings; were it ever not a number, it would
    // turn the series' sum into NaN for the life of the process (prom-client throws instead).
    if (!Number.isFinite(seconds)) return
    const series = this.#seriesOf(method, route, status)
    const bounds = this.#bounds
    let bucket = 0
    while (bucket < bounds.length && seconds > (bounds[bucket] as number)) bucket++
    const { counts } = series
    counts[bucket] = (counts[bucket] as number) + 1
    counts[bounds.length + 1] = (counts[bounds.length + 1] as number) + seconds
  }

  #seriesOf(method: string, route: string, status: number): Series {
    let byMethod = this.#byRoute.get(route)
    if (byMethod === undefined) {
      byMethod = new Map()
      this.#byRoute.set(route, byMethod)
    }
    let byStatus = byMethod.get(method)
    if (byStatus === undefined) {
      byStatus = new Map()
      byMethod.set(method, byStatus)
    }
    let series = byStatus.get(status)
    if (series === undefined) {
      series = {
        labels: {
          http_request_method: method,
          http_route: route,
          http_response_status_code: String(status),
        },
        counts: new Float64Array(this.#bounds.length + 2),
      }
      byStatus.set(status, series)
      this.#series.push(series)
    }
    return series
  }

  /** The samples, as prom-client's Histogram gives them. */
  async get() {
    const values: Sample[] = []
    const bounds = this.#bounds
    for (const { labels, counts } of this.#series) {
      let cumulative = 0
      for (const [i, bound] of bounds.entries()) {
        cumulative += counts[i] as number
        values.push({
          labels: { ...labels, le: bound },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        })
      }
      const count = cumulative + (counts[bounds.length] as number)
      values.push(
        { labels: { ...labels, le: '+Inf' }, value: count, metricName: `${this.name}_bucket` },
        {
          labels: { ...labels },
          value: counts[bounds.length + 1] as number,
          metricName: `${this.name}_sum`,
        },
        { labels: { ...labels }, value: count, metricName: `${this.name}_count` },
      )
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    }
  }

  reset(): void {
    this.#byRoute.clear()
    this.#series.length = 0
  }
}
