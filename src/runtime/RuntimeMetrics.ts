/**
 * The daemon's metrics (Effect's Metric API; docs/observability.md lists every name and what to alert on).
 * They live in the process's default metric registry: `agentwire status --metrics` and `--metrics-port` serve
 * them in the Prometheus text format, and an OTLP metrics exporter, when configured, posts the same values.
 *
 * Every label value is a fixed vocabulary (a connection state, an admission state, a wire code from a finite
 * literal schema, an invalid-frame code): never an id, a credential, a token or text from Core or a Harness.
 * Updating a metric never fails and never blocks.
 */
import { Context, Effect, Metric } from "effect"
import type { PreparationErrorCode } from "../proto/ErrorCodes.js"
import type { PromptSteerAckPayload } from "../proto/Steering.js"

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/** 1 for the connection's current state, 0 for the others. */
export const connectionState = Metric.gauge("agentwire_daemon_connection_state", {
  description: "The daemon's connection to Core: 1 for the current state"
})
export const heartbeats = counter("agentwire_daemon_heartbeats_total", "Heartbeats sent to Core (entered the send queue)")
export const admissions = counter("agentwire_daemon_admissions_total", "Admission outcomes sent (ready, rejected, failed) by error code")
export const cleanupsUnconfirmed = Metric.gauge("agentwire_daemon_cleanups_unconfirmed", {
  description: "Owned resources whose cleanup failed at least once and is still being retried"
})
export const runsActive = Metric.gauge("agentwire_daemon_runs_active", { description: "Runs started and not yet stopped" })
export const runsStarted = counter("agentwire_daemon_runs_started_total", "Runs whose native Turn started")
export const runsFinished = counter("agentwire_daemon_runs_finished_total", "Runs stopped, by how they settled")
export const receipts = counter(
  "agentwire_daemon_input_receipts_total",
  "Active-input receipts sent by phase (written, applied) and outcome (accepted, rejected, unknown)"
)
export const cancels = counter("agentwire_daemon_cancels_total", "Cancellation receipts sent, by outcome (applied, or the error code)")
export const frames = counter("agentwire_daemon_frames_total", "Frames sent (out) and received (in)")
export const frameBytes = counter("agentwire_daemon_frame_bytes_total", "Frame bytes sent (out) and received (in)")
export const decodeFailures = counter("agentwire_daemon_decode_failures_total", "Inbound frames that failed to decode, by reason")

const update = <I>(metric: Metric.Metric<I, unknown>, attributes: Record<string, string>, value: I) =>
  Metric.update(Metric.withAttributes(metric, attributes), value)

const ConnectionStates = ["starting", "connecting", "connected", "backoff", "stopped"] as const

/**
 * The status board changed: the connection's state (1 for the current one, 0 for the others) and the number
 * of cleanups still unconfirmed.
 */
export const statusChanged = (state: (typeof ConnectionStates)[number], unconfirmed: number): Effect.Effect<void> =>
  Effect.andThen(
    Effect.forEach(ConnectionStates, (s) => update(connectionState, { state: s }, s === state ? 1 : 0), { discard: true }),
    Metric.update(cleanupsUnconfirmed, unconfirmed)
  )

export const heartbeat: Effect.Effect<void> = Metric.update(heartbeats, 1)

/** An admission status that decides something was sent (preparing/starting/started are not counted). */
export const admission = (state: string, code: PreparationErrorCode | undefined): Effect.Effect<void> =>
  state === "ready" || state === "rejected" || state === "failed"
    ? update(admissions, { outcome: state, code: code ?? "none" }, 1)
    : Effect.void

export const runStarted: Effect.Effect<void> = Effect.andThen(Metric.update(runsStarted, 1), Metric.modify(runsActive, 1))

/** A started Run stopped: `completed` / `cancelled` (settled), `unconfirmed` (settlement unknown) or `stopped_locally`. */
export const runFinished = (status: string): Effect.Effect<void> =>
  Effect.andThen(update(runsFinished, { status }, 1), Metric.modify(runsActive, -1))

/** The `prompt_steer_ack` being sent. */
export const steerReceipt = (payload: PromptSteerAckPayload): Effect.Effect<void> => {
  if (payload.accepted) return update(receipts, { phase: "applied", outcome: "accepted" }, 1)
  if (payload.written === true) return update(receipts, { phase: "written", outcome: "accepted" }, 1)
  const code = payload.error_code
  return update(receipts, { phase: "applied", outcome: code === "outcome_unknown" ? "unknown" : "rejected" }, 1)
}

export const cancel = (outcome: string): Effect.Effect<void> => update(cancels, { outcome }, 1)

/** Counts frames of one direction: `count` frames of `bytes` in all (synchronous). */
export type FrameCounter = (count: number, bytes: number) => void

/**
 * The frame counters (`frames`, `frameBytes`) of one direction, bound to a connection's context once (issue 18,
 * relay): the series of the context's metric attributes plus `direction`, with the context carrying them built
 * here, once, where `Metric.withAttributes` built a new context on every update (two updates per batch were 1.6 %
 * of the daemon's relay samples). Counters only add, so totals are those of one update per frame. Its own counter
 * instances, so each keeps the series key of its one attribute set.
 */
export const boundFrameCounter = (context: Context.Context<never>, direction: "in" | "out"): FrameCounter => {
  const attributes = { ...Context.get(context, Metric.CurrentMetricAttributes), direction }
  const bound = Context.add(context, Metric.CurrentMetricAttributes, attributes)
  const count = counter(frames.id, frames.description ?? "")
  const size = counter(frameBytes.id, frameBytes.description ?? "")
  return (n, bytes) => {
    count.updateUnsafe(n, bound)
    size.updateUnsafe(bytes, bound)
  }
}

/** Counts one decode failure by its invalid-frame code (`frame_too_large`: refused unread by the socket). */
export const decodeFailureUnsafe = (context: Context.Context<never>, reason: string): void =>
  Metric.withAttributes(decodeFailures, { reason }).updateUnsafe(1, context)
