/**
 * The projection's state and its settlement rules (`TurnProjection.ts` applies facts to it): the evidence
 * gathered so far, how an outcome is built from it, how later evidence fills a settled outcome, and the two
 * ways a Turn settles without a dedicated fact (`done` once nothing else owns the outcome; end of
 * observation). Every failed settlement carries its typed error, built here from structured evidence.
 */
import type { ErrorCodes, Preparation, RunEvents } from "../../proto/index.js"
import {
  CancelUnconfirmed,
  DeliveryUnknown,
  ExecutionFailed,
  ExecutionUnknown,
  InputOutcomeUnknown,
  type ObservationEnd,
  PreparationCleanupUnconfirmed,
  PreparationUnknown
} from "../TurnErrors.js"
import type { TurnError, TurnOutcome, TurnResolution } from "../TurnOutcome.js"

type InputPhase = "sent" | "written"
type CancelState =
  | { readonly phase: "pending"; readonly delivery_id: string }
  | { readonly phase: "resolved"; readonly delivery_id: string }

export interface Continuity {
  readonly content?: string
  readonly native_session_id?: string
  readonly native_session_type?: string
  readonly source_completed_at_ms?: number
}

/** The reducer's state. Opaque to callers; build it with `initial` and `step`, read it with `resolve`. */
export interface TurnState {
  readonly runId: string
  readonly prepareSent: boolean
  readonly startSent: boolean
  readonly directSent: boolean
  /** `Dispatching` for execution_prepare without its outcome yet: it may have left. */
  readonly prepareMaybeSent: boolean
  /** `Dispatching` for execution_start / prompt_request without its outcome yet: the Run may have left. */
  readonly runMaybeSent: boolean
  readonly abandoned: boolean
  readonly prepCursor: Preparation.RevisionCursor | undefined
  readonly prepSeen: boolean
  /** The admission failed with a cleanup-unconfirmed code; a later `released` / `expired` confirms it. */
  readonly cleanupPending: ErrorCodes.PreparationErrorCode | undefined
  /** A Run event, or `starting` / `started`, proved the Run received its input. */
  readonly runEvidence: boolean
  readonly done: RunEvents.DonePayload | undefined
  /** The first problem Core records for a Turn that still completes natively. */
  readonly problem: { readonly code: "engine_failed" | "input_outcome_unknown"; readonly input_id?: string } | undefined
  readonly engine: RunEvents.EngineFailure | undefined
  readonly errorText: string | undefined
  readonly usage: RunEvents.Usage | undefined
  readonly continuity: Continuity
  readonly cancel: CancelState | undefined
  readonly inputs: ReadonlyMap<string, InputPhase>
  readonly resolution: TurnResolution
}

/** The state before any fact of the Turn of `runId`. */
export const initial = (runId: string): TurnState => ({
  runId,
  prepareSent: false,
  startSent: false,
  directSent: false,
  prepareMaybeSent: false,
  runMaybeSent: false,
  abandoned: false,
  prepCursor: undefined,
  prepSeen: false,
  cleanupPending: undefined,
  runEvidence: false,
  done: undefined,
  problem: undefined,
  engine: undefined,
  errorText: undefined,
  usage: undefined,
  continuity: {},
  cancel: undefined,
  inputs: new Map(),
  resolution: { _tag: "Pending" }
})

export const isPending = (s: TurnState) => s.resolution._tag === "Pending"

export const continuityOf = (done: RunEvents.DonePayload): Continuity => ({
  content: done.content,
  ...(done.metadata?.agent_session_id === undefined ? {} : { native_session_id: done.metadata.agent_session_id }),
  ...(done.metadata?.agent_session_type === undefined ? {} : { native_session_type: done.metadata.agent_session_type }),
  ...(done.source_completed_at_ms === undefined ? {} : { source_completed_at_ms: done.source_completed_at_ms })
})

/** Later evidence fills fields still unknown; it never replaces what a settled outcome already holds. */
export const fillContinuity = (base: Continuity, extra: Continuity): Continuity => {
  const out: Record<string, unknown> = { ...base }
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) continue
    const current = out[k]
    if (current === undefined || (k === "content" && current === "")) out[k] = v
  }
  return out as Continuity
}

type Head = Omit<TurnOutcome, "engine_error_code" | "engine_http_status">

/** Builds the outcome from the evidence gathered so far. */
const outcomeOf = (s: TurnState, head: Head): TurnOutcome => {
  const c = s.continuity
  return {
    ...head,
    ...(s.engine === undefined ? {} : { engine_error_code: s.engine.code }),
    ...(s.engine?.httpStatus === undefined ? {} : { engine_http_status: s.engine.httpStatus }),
    ...(s.errorText === undefined || head.error !== undefined ? {} : { error: s.errorText }),
    ...(c.content === undefined || head.content !== undefined ? {} : { content: c.content }),
    ...(s.usage === undefined || head.usage !== undefined ? {} : { usage: s.usage }),
    ...(c.native_session_id === undefined ? {} : { native_session_id: c.native_session_id }),
    ...(c.native_session_type === undefined ? {} : { native_session_type: c.native_session_type }),
    ...(c.source_completed_at_ms === undefined ? {} : { source_completed_at_ms: c.source_completed_at_ms })
  }
}

/** Settles `completed` or `cancelled` (no error). */
export const settleOk = (s: TurnState, head: Head & { readonly status: "completed" | "cancelled" }): TurnState => ({
  ...s,
  resolution: { _tag: "Settled", outcome: { ...outcomeOf(s, head), status: head.status } }
})

/** Settles `failed` with the typed error that says what is known. */
export const settleFailed = (s: TurnState, head: Omit<Head, "status">, error: TurnError): TurnState => ({
  ...s,
  resolution: { _tag: "Settled", outcome: { ...outcomeOf(s, { ...head, status: "failed" }), status: "failed" }, error }
})

/** The engine's failure as a typed error (the classification is metadata; the status comes from `done`). */
const executionFailed = (s: TurnState) =>
  new ExecutionFailed({
    run_id: s.runId,
    ...(s.engine === undefined ? {} : { engine_error_code: s.engine.code }),
    ...(s.engine?.httpStatus === undefined ? {} : { engine_http_status: s.engine.httpStatus })
  })

/** Re-projects a settled outcome after later evidence (status and error_code never change). */
export const refresh = (s: TurnState): TurnState => {
  const r = s.resolution
  if (r._tag !== "Settled") return s
  const o = r.outcome
  const c = s.continuity
  // The engine classification follows the error frames (the last one wins), subordinate to the status.
  const { engine_error_code: _c, engine_http_status: _h, ...rest } = o
  const next: TurnOutcome = {
    ...rest,
    ...(o.content === undefined && c.content !== undefined ? { content: c.content } : {}),
    ...(o.usage === undefined && s.usage !== undefined ? { usage: s.usage } : {}),
    ...(o.native_session_id === undefined && c.native_session_id !== undefined ? { native_session_id: c.native_session_id } : {}),
    ...(o.native_session_type === undefined && c.native_session_type !== undefined
      ? { native_session_type: c.native_session_type }
      : {}),
    ...(o.source_completed_at_ms === undefined && c.source_completed_at_ms !== undefined
      ? { source_completed_at_ms: c.source_completed_at_ms }
      : {}),
    ...(o.error === undefined && s.errorText !== undefined ? { error: s.errorText } : {}),
    ...(s.engine === undefined ? {} : { engine_error_code: s.engine.code }),
    ...(s.engine?.httpStatus === undefined ? {} : { engine_http_status: s.engine.httpStatus })
  }
  if (!("error" in r)) return { ...s, resolution: { _tag: "Settled", outcome: { ...next, status: r.outcome.status } } }
  const error = r.error._tag === "ExecutionFailed" ? executionFailed(s) : r.error
  return { ...s, resolution: { _tag: "Settled", outcome: { ...next, status: "failed" }, error } }
}

export const inputUnknown = (s: TurnState, inputId: string): TurnState => {
  const inputs = new Map(s.inputs)
  inputs.delete(inputId)
  return { ...s, inputs, problem: s.problem ?? { code: "input_outcome_unknown", input_id: inputId } }
}

/** Settles from `done` once nothing else owns the outcome (a pending cancellation or an in-flight input). */
export const settleFromDone = (s: TurnState): TurnState => {
  if (!isPending(s) || s.done === undefined) return s
  if (s.cancel?.phase === "pending" || s.inputs.size > 0) return s
  const problem = s.problem
  if (problem === undefined) return settleOk(s, { status: "completed" })
  if (problem.code === "engine_failed") return settleFailed(s, { error_code: "engine_failed" }, executionFailed(s))
  const inputId = problem.input_id ?? ""
  return settleFailed(
    s,
    { error_code: "input_outcome_unknown", unknown_input_id: inputId },
    new InputOutcomeUnknown({ run_id: s.runId, input_id: inputId, reason: "turn_ended" })
  )
}

/** Observation of the Run ended without done (or Core restarted). */
export const observationEnded = (s: TurnState, reason: ObservationEnd): TurnState => {
  if (!isPending(s)) return s
  const run_id = s.runId
  if (s.cleanupPending !== undefined) {
    const code = s.cleanupPending
    return settleFailed(
      s,
      { error_code: "cleanup_unconfirmed", preparation_error_code: code, observation: reason },
      new PreparationCleanupUnconfirmed({ code, reason })
    )
  }
  if (s.cancel?.phase === "pending") {
    const delivery_id = s.cancel.delivery_id
    return settleFailed(
      s,
      { error_code: "cancel_unconfirmed", observation: reason, cancel_delivery_id: delivery_id },
      new CancelUnconfirmed({ run_id, delivery_id, reason: "connection_lost" })
    )
  }
  if (s.done !== undefined) {
    // The stream completed; in-flight inputs can no longer be confirmed.
    let next = s
    for (const id of s.inputs.keys()) next = inputUnknown(next, id)
    return settleFromDone({ ...next, inputs: new Map() })
  }
  if (s.runEvidence) {
    return settleFailed(s, { error_code: "event_stream_incomplete", observation: reason }, new ExecutionUnknown({ run_id, reason }))
  }
  if (s.startSent || s.directSent || s.runMaybeSent || ((s.prepareSent || s.prepareMaybeSent) && !s.prepSeen)) {
    return settleFailed(s, { error_code: "delivery_unknown", observation: reason }, new DeliveryUnknown({ run_id, reason }))
  }
  if (s.prepareSent || s.prepareMaybeSent) {
    return settleFailed(s, { error_code: "preparation_interrupted", observation: reason }, new PreparationUnknown({ reason }))
  }
  return s
}
