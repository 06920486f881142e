/**
 * The dev Core's Turn telemetry (docs/observability.md): the `Turn` span a runner runs in, the `Turn.settle`
 * span of recording its outcome, and the journal's batch-size and commit-latency histograms (recorded once per
 * group-commit transaction by `JournalCommit.ts`, not per append).
 *
 * Span attributes are ids Core generated and finite vocabularies (agent kind, status, error code): never the
 * prompt, the input, `agent_options`, a credential or a token. The delivery layer's spans (`Turn.prepare`,
 * `Turn.start`, `Turn.events`) are children of `Turn`; their sends carry the span as the frame's `trace`, so
 * the daemon's handler spans join the same trace. A Turn's spans capture no stack trace (one call site each; a
 * trace is a `new Error()` per span).
 */
import { Effect, Metric, Option, type Tracer } from "effect"
import type * as Outcome from "../Outcome.js"

/** The ids of a Turn its span carries. */
export interface TurnIds {
  readonly turnId: string
  readonly sessionId: string
  readonly runId: string
  readonly deviceId: string
  readonly spec: { readonly agent_kind: string }
}

/** Runs a Turn's runner in the `Turn` span (a child of the operator request that started it, if any). */
export const turnSpan = (plan: TurnIds) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withSpan(self, "Turn", {
    captureStackTrace: false,
    attributes: {
      "agentwire.turn_id": plan.turnId,
      "agentwire.session_id": plan.sessionId,
      "agentwire.run_id": plan.runId,
      "agentwire.device_id": plan.deviceId,
      "agentwire.agent_kind": plan.spec.agent_kind
    }
  })

/** Records the outcome in the `Turn.settle` span, annotated with the status and error code. */
export const settleSpan = (outcome: Outcome.TurnOutcome) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withSpan(self, "Turn.settle", {
    captureStackTrace: false,
    attributes: {
      "agentwire.status": outcome.status,
      ...(outcome.error_code === undefined ? {} : { "agentwire.error_code": outcome.error_code }),
      ...(outcome.observation === undefined ? {} : { "agentwire.observation": outcome.observation })
    }
  })

/**
 * Runs an operator's request on a running Turn (steer, cancel) in a span named `name` below the Turn's span,
 * linked to the request's own span, so the Turn's trace holds what it caused on the daemon. Without a Turn
 * span (none recorded) it is an ordinary child span of the request.
 */
export const inTurn = (turnSpan: Tracer.AnySpan | undefined, name: string, attributes: Record<string, string>) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  turnSpan === undefined
    ? Effect.withSpan(self, name, { attributes })
    : Effect.flatMap(Effect.option(Effect.currentParentSpan), (caller) =>
      Effect.withSpan(self, name, {
        attributes,
        parent: turnSpan,
        links: Option.isSome(caller) ? [{ span: caller.value, attributes: { "agentwire.link": "operator_request" } }] : []
      }))

export const journalBatchSize = Metric.histogram("agentwire_core_journal_batch_size", {
  description: "Facts (rows) stored per journal transaction",
  boundaries: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
})

export const journalTransactionWrites = Metric.histogram("agentwire_core_journal_transaction_writes", {
  description: "Journal appends (of any Turns) committed in one group-commit transaction",
  boundaries: [1, 2, 4, 8, 16, 32, 64, 128]
})

export const journalCommitSeconds = Metric.histogram("agentwire_core_journal_commit_seconds", {
  description: "Latency of one journal transaction, from its batch's first append queued to its commit",
  boundaries: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
})
