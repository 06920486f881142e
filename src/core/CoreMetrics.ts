/**
 * Core's metrics (Effect's Metric API; docs/observability.md lists every name and what to alert on). They live
 * in the process's default metric registry: the dev Core serves them at `/metrics` (Prometheus text) and an
 * OTLP metrics exporter, when configured, posts the same values.
 *
 * Every label value is a fixed vocabulary: a state, an outcome, a decoded wire code (finite literal schemas)
 * or an invalid-frame code. Never an id, a credential, a token or text a peer sent, so a series count is
 * bounded whatever the peers do. Updating a metric never fails and never blocks.
 */
import { type Context, Effect, Metric } from "effect"
import type { Preparation } from "../proto/index.js"
import * as SocketReads from "./transport/SocketReads.js"

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/** Open device connections by state (`open`: accepted, not yet closed). */
export const connections = Metric.gauge("agentwire_core_connections", {
  description: "Open Runtime connections by state"
})
/** Connections accepted and ended. */
export const connectionEvents = counter("agentwire_core_connection_events_total", "Runtime connections accepted / closed")
export const heartbeats = counter("agentwire_core_heartbeats_total", "Heartbeats received from Runtimes")
export const admissions = counter(
  "agentwire_core_admissions_total",
  "Preparation outcomes Core observed (ready, rejected, failed) by error code"
)
export const cleanupsUnconfirmed = counter(
  "agentwire_core_cleanups_unconfirmed_total",
  "Preparations that failed with an unconfirmed cleanup (cleanup_unconfirmed, executor_cleanup_unconfirmed)"
)
export const runsActive = Metric.gauge("agentwire_core_runs_active", { description: "Runs dispatched and not yet finished" })
export const runsStarted = counter("agentwire_core_runs_started_total", "Runs whose start (or prompt_request) entered the send queue")
export const runsFinished = counter("agentwire_core_runs_finished_total", "Runs finished, by the Turn's status")
export const receipts = counter(
  "agentwire_core_input_receipts_total",
  "Active-input receipts by phase (written, applied) and outcome (accepted, rejected, unknown)"
)
export const cancels = counter("agentwire_core_cancels_total", "Cancellation outcomes after start")
export const frames = counter("agentwire_core_frames_total", "Frames sent (out) and received (in)")
export const frameBytes = counter("agentwire_core_frame_bytes_total", "Frame bytes sent (out) and received (in)")
export const decodeFailures = counter("agentwire_core_decode_failures_total", "Inbound frames that failed to decode, by reason")

/**
 * One counter per series, built the first time its attribute set is seen and reused: the attributes are the
 * counter's own (the same registry series key as `Metric.withAttributes`). `withAttributes` built a wrapper metric
 * and added the set to the fiber's context on every update (a copy of the whole context once it is 8 adds deep)
 * and, the set being a new object each time, recomputed the series key (a sort and a `JSON.stringify`): two per
 * one-delta Turn (issue 18). Label values are a fixed vocabulary (see above), so the cache is bounded.
 */
const seriesOf = new Map<Metric.Counter<number>, Map<string, Metric.Counter<number>>>()
export const series = (metric: Metric.Counter<number>, attributes: Record<string, string>): Metric.Counter<number> => {
  let byValues = seriesOf.get(metric)
  if (byValues === undefined) seriesOf.set(metric, byValues = new Map())
  let key = ""
  for (const name in attributes) key += `${name}\u0000${attributes[name]}\u0000`
  let counter = byValues.get(key)
  if (counter === undefined) {
    counter = Metric.counter(metric.id, { description: metric.description, incremental: true, attributes })
    byValues.set(key, counter)
  }
  return counter
}

const update = (metric: Metric.Counter<number>, attributes: Record<string, string>, value: number) =>
  Metric.update(series(metric, attributes), value)

/** One connection accepted (+1 open) or closed (-1 open). */
export const connection = (event: "accepted" | "closed") =>
  Effect.andThen(
    update(connectionEvents, { event }, 1),
    Metric.modify(Metric.withAttributes(connections, { state: "open" }), event === "accepted" ? 1 : -1)
  )

/** A preparation status Core recorded: terminal outcomes count as admissions. */
export const preparationStatus = (status: Preparation.PreparationStatusPayload): Effect.Effect<void> => {
  if (status.state !== "ready" && status.state !== "rejected" && status.state !== "failed") return Effect.void
  const code = status.error_code ?? "none"
  const counted = update(admissions, { outcome: status.state, code }, 1)
  return status.state === "failed" && (code === "cleanup_unconfirmed" || code === "executor_cleanup_unconfirmed")
    ? Effect.andThen(counted, update(cleanupsUnconfirmed, { code }, 1))
    : counted
}

/** The Run was dispatched (start or prompt_request entered the send queue). */
export const runStarted: Effect.Effect<void> = Effect.andThen(
  Metric.update(runsStarted, 1),
  Metric.modify(runsActive, 1)
)

/** A dispatched Run's Turn finished with `status` (`unresolved` when its scope closed first). */
export const runFinished = (status: string): Effect.Effect<void> =>
  Effect.andThen(update(runsFinished, { status }, 1), Metric.modify(runsActive, -1))

export const receipt = (phase: "written" | "applied", outcome: "accepted" | "rejected" | "unknown") =>
  update(receipts, { phase, outcome }, 1)

export const cancel = (outcome: "applied" | "rejected" | "failed" | "unconfirmed" | "not_sent") =>
  update(cancels, { outcome }, 1)

/** One frame of `bytes` in one direction. */
export const frame = (direction: "in" | "out", bytes: number) =>
  Effect.andThen(update(frames, { direction }, 1), update(frameBytes, { direction }, bytes))


// Synchronous updates for the connection's read loop and send path (no effect allocated per frame).
// One counter instance per series (the same names, so the same registry series as `frames` / `frameBytes`): a
// metric caches the key of the last attribute set it saw, so one instance shared by "in" and "out" recomputed its
// series key (a sort and a JSON.stringify) on every frame of a request / receipt exchange. The direction is the
// counter's own attribute (the same series key as `Metric.withAttributes`), not added to the context per update:
// that copied the gateway's context (about 60 services) twice per frame, 2 µs of a heartbeat (issue 18).
const directed = (name: string, description: string, direction: "in" | "out") =>
  Metric.counter(name, { description, incremental: true, attributes: { direction } })
const framesIn = directed(frames.id, frames.description ?? "", "in")
const framesOut = directed(frames.id, frames.description ?? "", "out")
const bytesIn = directed(frameBytes.id, frameBytes.description ?? "", "in")
const bytesOut = directed(frameBytes.id, frameBytes.description ?? "", "out")

/** Counts one frame of `bytes` in `direction` in the registry of `context` (the session's, captured once). */
export const frameUnsafe = (context: Context.Context<never>, direction: "in" | "out", bytes: number): void => {
  if (direction === "in") {
    framesIn.updateUnsafe(1, context)
    bytesIn.updateUnsafe(bytes, context)
  } else {
    framesOut.updateUnsafe(1, context)
    bytesOut.updateUnsafe(bytes, context)
  }
}

/**
 * The inbound frames and bytes of one connection not yet added to the registry. The read side counts every frame
 * here (`inboundUnsafe`) and the counts of every connection that read something go to the registry once, at the
 * end of the socket read when the transport marks it (`SocketReads`: the `ws` transport), else at the end of the
 * current job (a microtask): one socket read can carry hundreds of frames, so a relayed Run costs two metric
 * updates per read instead of two per frame, and an idle device's heartbeat (a read of one frame) queues no
 * microtask (issue 18). Counters only add, so the totals are the same; a scrape (another job) never sees a read
 * half counted.
 */
export class InboundCount {
  frames = 0
  bytes = 0
  constructor(readonly context: Context.Context<never>) {}
}

/**
 * The counts waiting for the end of the current read or job: the first `uncountedSize` slots. The array keeps its
 * length (a `length = 0` dropped its backing store, so the next read's `push` allocated a new one: ~150 B per
 * heartbeat of an idle device; issue 18).
 */
const uncounted: Array<InboundCount | undefined> = []
let uncountedSize = 0

const flushInbound = (): void => {
  for (let i = 0; i < uncountedSize; i++) {
    const count = uncounted[i]!
    uncounted[i] = undefined
    framesIn.updateUnsafe(count.frames, count.context)
    bytesIn.updateUnsafe(count.bytes, count.context)
    count.frames = 0
    count.bytes = 0
  }
  uncountedSize = 0
}

/** Counts one inbound frame of `bytes` (added to the registry at the end of the read or job, see `InboundCount`). */
export const inboundUnsafe = (count: InboundCount, bytes: number): void => {
  if (count.frames === 0) {
    if (uncountedSize === 0 && !SocketReads.atReadEnd(flushInbound)) queueMicrotask(flushInbound)
    uncounted[uncountedSize++] = count
  }
  count.frames++
  count.bytes += bytes
}

export const heartbeatUnsafe = (context: Context.Context<never>): void => heartbeats.updateUnsafe(1, context)

/**
 * Counts one decode failure (`reason`: the invalid-frame code). The frame itself is counted once, by
 * `frameUnsafe`, where it was read, whether or not it decodes.
 */
export const decodeFailureUnsafe = (context: Context.Context<never>, reason: string): void =>
  series(decodeFailures, { reason }).updateUnsafe(1, context)
