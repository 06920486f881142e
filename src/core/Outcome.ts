/**
 * The public Turn outcome projection (protocol "Failures, retries and cleanup", "Native failure
 * classification", "What each acknowledgement proves").
 *
 * Owns: the `TurnFact` journal a Turn records as it goes, the pure reducer `project(facts)` that turns the
 * journal into a `TurnResolution`, and `toResult`, which maps a resolution to the typed error that says what
 * is known. The error classes live in `TurnErrors.ts` and are re-exported here. The dev Core persists the
 * facts and replays them through `project` after a restart, so delivery and journal draining share one
 * projection (and one engine-failure extraction, `RunEvents.normalizeEngineFailure`, already applied when the
 * error frame decoded).
 *
 * Never: an engine failure code deciding the status; a `done` overriding a cancellation receipt; inventing
 * usage (absent = unknown).
 */
import { Schema } from "effect"
import {
  type Capabilities,
  ErrorCodes,
  Interaction,
  Messages,
  Preparation,
  RunEvents
} from "../proto/index.js"
import { type RunEvent, runEventTypes } from "./RunEvent.js"
import {
  type AdmissionRejection,
  BindingInvalid,
  type BindingInvalidReason,
  CancelUnconfirmed,
  CapabilitiesUnknown,
  CapabilityUnsupported,
  ConfigurationRejected,
  DeliveryRefused,
  DeliveryUnknown,
  ExecutionFailed,
  ExecutionUnknown,
  HarnessUnavailable,
  InputOutcomeUnknown,
  InputUnknownReason,
  ObservationEnd,
  PreparationFailed,
  PreparationRejected,
  PreparationUnknown
} from "./TurnErrors.js"

export * from "./TurnErrors.js"

// ---------------------------------------------------------------------------------------------- facts

/** Requests whose dispatch a Turn records. */
export const DispatchType = Schema.Literals([
  "execution_prepare",
  "execution_start",
  "execution_release",
  "prompt_request",
  "prompt_cancel",
  "prompt_steer"
])
export type DispatchType = typeof DispatchType.Type

/** The wire schema of a Run event (persisted facts decode with it). */
export const RunEventSchema = Schema.Union(runEventTypes.map((t) => Messages.runtimeToCore[t].schema)) as unknown as Schema.Codec<
  RunEvent,
  unknown
>

/**
 * One thing a Turn observed or did, in order. Facts are plain data: the dev Core persists them and replays
 * them through `project` after a restart (appending `RunObservationEnded{reason: "core_restarted"}` for a
 * Turn that was in flight).
 */
export const TurnFact = Schema.Union([
  /** The final admission check refused the Turn (nothing sent). */
  Schema.TaggedStruct("AdmissionRejected", {
    rejection: Schema.Literals([
      "capabilities_unknown",
      "harness_unavailable",
      "binding_invalid",
      "capability_unsupported",
      "configuration_rejected"
    ]),
    detail: Schema.String
  }),
  /**
   * Core is about to hand a Run-carrying request (`execution_prepare`, `execution_start`, `prompt_request`)
   * to the send queue. Journaled before the send when the boundary is durable: alone (no `Dispatched` /
   * `NotDispatched` after it) it means the request may have left.
   */
  Schema.TaggedStruct("Dispatching", { type: DispatchType }),
  /** The envelope entered the send queue (proves nothing more). */
  Schema.TaggedStruct("Dispatched", {
    type: DispatchType,
    delivery_id: Schema.optionalKey(Schema.String),
    input_id: Schema.optionalKey(Schema.String)
  }),
  /** The envelope did not enter the send queue, or its waiter could not be registered. Definite: nothing sent. */
  Schema.TaggedStruct("NotDispatched", {
    type: DispatchType,
    reason: Schema.Literals([
      "queue_full",
      "connection_closed",
      "invalid_message",
      "frame_too_large",
      "subscription_rejected",
      "journal_unavailable" // the durable boundary was refused: the journal could not record `Dispatching`
    ]),
    delivery_id: Schema.optionalKey(Schema.String),
    input_id: Schema.optionalKey(Schema.String)
  }),
  /** A preparation status (already revision-filtered by the session; the reducer applies the rule again). */
  Schema.TaggedStruct("PreparationStatus", { status: Preparation.PreparationStatusPayload }),
  /** The preparation status subscription ended without a terminal state. */
  Schema.TaggedStruct("PreparationObservationEnded", { reason: ObservationEnd }),
  /** A Run event as received. */
  Schema.TaggedStruct("RunEvent", { event: RunEventSchema }),
  /** The Run subscription ended without `done` (or Core restarted while the Turn was in flight). */
  Schema.TaggedStruct("RunObservationEnded", { reason: ObservationEnd }),
  /** The cancellation receipt matched by Run id and delivery id. */
  Schema.TaggedStruct("CancelReceipt", {
    delivery_id: Schema.String,
    ack: Interaction.InteractionDecisionAckPayload
  }),
  /** No cancellation receipt: 15 s passed or the connection ended. */
  Schema.TaggedStruct("CancelUnconfirmed", {
    delivery_id: Schema.String,
    reason: Schema.Literals(["no_receipt", "connection_lost", "receipt_overflow"])
  }),
  Schema.TaggedStruct("InputWritten", { input_id: Schema.String }),
  Schema.TaggedStruct("InputAccepted", { input_id: Schema.String }),
  Schema.TaggedStruct("InputRejected", { input_id: Schema.String, code: ErrorCodes.SteerErrorCode }),
  Schema.TaggedStruct("InputUnknown", { input_id: Schema.String, reason: InputUnknownReason }),
  /** Core decided not to start the prepared admission (before execution_start was sent). */
  Schema.TaggedStruct("Abandoned", {})
])
export type TurnFact = typeof TurnFact.Type

// ---------------------------------------------------------------------------------------------- outcome

export const TurnStatus = Schema.Literals(["completed", "failed", "cancelled"])
export type TurnStatus = typeof TurnStatus.Type

/** Core's own error codes of a Turn (the observation reason and native evidence are kept apart). */
export const CoreErrorCode = Schema.Literals([
  "delivery_failed", // the request never entered the send queue (definite, nothing sent)
  "delivery_unknown", // a request entered the queue; observation ended before any reply proved delivery
  "event_stream_incomplete", // the Run was observed and its stream ended without done
  "preparation_rejected", // a control operation was refused (definite)
  "preparation_failed", // the admission failed or was released without Core asking (definite)
  "preparation_expired", // the admission expired before start (definite)
  "preparation_interrupted", // observation ended during preparation, before start was sent
  "engine_failed", // the Run reported an execution error, then done
  "input_outcome_unknown", // an active input's outcome is unknown at the end of the Turn
  "cancel_unconfirmed", // cancellation sent and not proven
  "capability_unsupported", // the final admission check refused (definite)
  "binding_invalid",
  "configuration_rejected"
])
export type CoreErrorCode = typeof CoreErrorCode.Type

/**
 * The public Turn outcome. `status` and `error_code` are Core's projection; `observation` says why
 * observation ended; `engine_error_code` / `engine_http_status` are subordinate native metadata; `usage` is
 * the last cumulative snapshot (absent = unknown, never zero).
 */
export const TurnOutcome = Schema.Struct({
  status: TurnStatus,
  error_code: Schema.optionalKey(CoreErrorCode),
  /** What the admission or dispatch refusal was about (capability name, binding reason, NotSent reason). */
  detail: Schema.optionalKey(Schema.String),
  observation: Schema.optionalKey(ObservationEnd),
  preparation_error_code: Schema.optionalKey(ErrorCodes.PreparationErrorCode),
  preparation_operation: Schema.optionalKey(Preparation.ControlOperation),
  cancel_delivery_id: Schema.optionalKey(Schema.String),
  cancel_error_code: Schema.optionalKey(ErrorCodes.CancelErrorCode),
  unknown_input_id: Schema.optionalKey(Schema.String),
  engine_error_code: Schema.optionalKey(ErrorCodes.EngineFailureCode),
  engine_http_status: Schema.optionalKey(Schema.Int),
  /** The last execution error text (native evidence; never logged). */
  error: Schema.optionalKey(Schema.String),
  content: Schema.optionalKey(Schema.String),
  usage: Schema.optionalKey(RunEvents.Usage),
  native_session_id: Schema.optionalKey(Schema.String),
  native_session_type: Schema.optionalKey(Schema.String),
  source_completed_at_ms: Schema.optionalKey(Schema.Int)
})
export type TurnOutcome = typeof TurnOutcome.Type

/** Why a Turn stays unclaimed (nothing was executed; the Worker may retry it). */
export type UnclaimedReason = "preparation_capacity" | "capabilities_unknown" | "harness_unavailable"

export type TurnResolution =
  | { readonly _tag: "Pending" }
  | { readonly _tag: "Unclaimed"; readonly reason: UnclaimedReason }
  | { readonly _tag: "Settled"; readonly outcome: TurnOutcome }

// ---------------------------------------------------------------------------------------------- reducer

type InputPhase = "sent" | "written"
type CancelState =
  | { readonly phase: "pending"; readonly delivery_id: string }
  | { readonly phase: "resolved"; readonly delivery_id: string }

/** The reducer's state. Opaque to callers; build it with `initial` and `step`, read it with `resolve`. */
export interface TurnState {
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

interface Continuity {
  readonly content?: string
  readonly native_session_id?: string
  readonly native_session_type?: string
  readonly source_completed_at_ms?: number
}

export const initial: TurnState = {
  prepareSent: false,
  startSent: false,
  directSent: false,
  prepareMaybeSent: false,
  runMaybeSent: false,
  abandoned: false,
  prepCursor: undefined,
  prepSeen: false,
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
}

const isPending = (s: TurnState) => s.resolution._tag === "Pending"

const continuityOf = (done: RunEvents.DonePayload): Continuity => ({
  content: done.content,
  ...(done.metadata?.agent_session_id === undefined ? {} : { native_session_id: done.metadata.agent_session_id }),
  ...(done.metadata?.agent_session_type === undefined ? {} : { native_session_type: done.metadata.agent_session_type }),
  ...(done.source_completed_at_ms === undefined ? {} : { source_completed_at_ms: done.source_completed_at_ms })
})

/** Later evidence fills fields still unknown; it never replaces what a settled outcome already holds. */
const fillContinuity = (base: Continuity, extra: Continuity): Continuity => {
  const out: Record<string, unknown> = { ...base }
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) continue
    const current = out[k]
    if (current === undefined || (k === "content" && current === "")) out[k] = v
  }
  return out as Continuity
}

/** Builds the outcome from the evidence gathered so far. */
const outcomeOf = (s: TurnState, head: Omit<TurnOutcome, "engine_error_code" | "engine_http_status">): TurnOutcome => {
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

const settle = (s: TurnState, head: Omit<TurnOutcome, "engine_error_code" | "engine_http_status">): TurnState => ({
  ...s,
  resolution: { _tag: "Settled", outcome: outcomeOf(s, head) }
})

/** Re-projects a settled outcome after later evidence (status and error_code never change). */
const refresh = (s: TurnState): TurnState => {
  if (s.resolution._tag !== "Settled") return s
  const o = s.resolution.outcome
  const c = s.continuity
  const next: TurnOutcome = {
    ...o,
    ...(o.content === undefined && c.content !== undefined ? { content: c.content } : {}),
    ...(o.usage === undefined && s.usage !== undefined ? { usage: s.usage } : {}),
    ...(o.native_session_id === undefined && c.native_session_id !== undefined ? { native_session_id: c.native_session_id } : {}),
    ...(o.native_session_type === undefined && c.native_session_type !== undefined
      ? { native_session_type: c.native_session_type }
      : {}),
    ...(o.source_completed_at_ms === undefined && c.source_completed_at_ms !== undefined
      ? { source_completed_at_ms: c.source_completed_at_ms }
      : {}),
    ...(o.error === undefined && s.errorText !== undefined ? { error: s.errorText } : {})
  }
  // The engine classification follows the error frames (the last one wins), subordinate to the status.
  const { engine_error_code: _c, engine_http_status: _h, ...rest } = next
  const withEngine: TurnOutcome = {
    ...rest,
    ...(s.engine === undefined ? {} : { engine_error_code: s.engine.code }),
    ...(s.engine?.httpStatus === undefined ? {} : { engine_http_status: s.engine.httpStatus })
  }
  return { ...s, resolution: { _tag: "Settled", outcome: withEngine } }
}

/** Settles from `done` once nothing else owns the outcome (a pending cancellation or an in-flight input). */
const settleFromDone = (s: TurnState): TurnState => {
  if (!isPending(s) || s.done === undefined) return s
  if (s.cancel?.phase === "pending" || s.inputs.size > 0) return s
  if (s.problem !== undefined) {
    return settle(s, {
      status: "failed",
      error_code: s.problem.code,
      ...(s.problem.input_id === undefined ? {} : { unknown_input_id: s.problem.input_id })
    })
  }
  return settle(s, { status: "completed" })
}

/** Observation of the Run ended without done (or Core restarted). */
const observationEnded = (s: TurnState, reason: ObservationEnd): TurnState => {
  if (!isPending(s)) return s
  if (s.cancel?.phase === "pending") {
    return settle(s, { status: "failed", error_code: "cancel_unconfirmed", observation: reason, cancel_delivery_id: s.cancel.delivery_id })
  }
  if (s.done !== undefined) {
    // The stream completed; in-flight inputs can no longer be confirmed.
    let next = s
    for (const id of s.inputs.keys()) next = inputUnknown(next, id)
    return settleFromDone({ ...next, inputs: new Map() })
  }
  if (s.runEvidence) return settle(s, { status: "failed", error_code: "event_stream_incomplete", observation: reason })
  if (s.startSent || s.directSent || s.runMaybeSent) {
    return settle(s, { status: "failed", error_code: "delivery_unknown", observation: reason })
  }
  if (s.prepareSent || s.prepareMaybeSent) {
    return settle(s, {
      status: "failed",
      error_code: s.prepSeen ? "preparation_interrupted" : "delivery_unknown",
      observation: reason
    })
  }
  return s
}

const inputUnknown = (s: TurnState, inputId: string): TurnState => {
  const inputs = new Map(s.inputs)
  inputs.delete(inputId)
  return {
    ...s,
    inputs,
    problem: s.problem ?? { code: "input_outcome_unknown", input_id: inputId }
  }
}

const onPreparation = (s: TurnState, status: Preparation.PreparationStatusPayload): TurnState => {
  const applied = Preparation.applyRevision(s.prepCursor, status)
  if (!applied.apply) return s
  const next: TurnState = { ...s, prepCursor: applied.cursor, prepSeen: s.prepSeen || status.state !== "rejected" }
  if (!isPending(next)) return next
  switch (status.state) {
    case "starting":
    case "started":
      return { ...next, runEvidence: true }
    case "rejected": {
      const operation = status.operation ?? "execution_prepare"
      const code = status.error_code ?? "invalid_request"
      if (operation === "execution_release") return next
      if (operation === "execution_prepare" && ErrorCodes.isRetrySafePreparationCode(code) && !next.startSent) {
        return { ...next, resolution: { _tag: "Unclaimed", reason: "preparation_capacity" } }
      }
      return settle(next, {
        status: "failed",
        error_code: "preparation_rejected",
        preparation_error_code: code,
        preparation_operation: operation
      })
    }
    case "failed":
      return settle(next, {
        status: "failed",
        error_code: "preparation_failed",
        ...(status.error_code === undefined ? {} : { preparation_error_code: status.error_code })
      })
    case "expired":
      return settle(next, { status: "failed", error_code: "preparation_expired" })
    case "released":
      return settle(next, {
        status: "failed",
        error_code: "preparation_failed",
        ...(status.error_code === undefined ? {} : { preparation_error_code: status.error_code })
      })
    default:
      return next
  }
}

const onRunEvent = (s0: TurnState, event: RunEvent): TurnState => {
  const s = s0.runEvidence ? s0 : { ...s0, runEvidence: true }
  switch (event.type) {
    case "usage":
      // A cumulative snapshot replaces the previous one; after settlement it only fills an unknown usage.
      return isPending(s) ? { ...s, usage: event.payload } : refresh(s.usage === undefined ? { ...s, usage: event.payload } : s)
    case "error": {
      const engine = event.payload.code === undefined
        ? undefined
        : { code: event.payload.code, httpStatus: event.payload.http_status }
      const next: TurnState = {
        ...s,
        engine,
        errorText: event.payload.error,
        problem: isPending(s) ? (s.problem ?? { code: "engine_failed" }) : s.problem
      }
      return isPending(s) ? next : refresh(next)
    }
    case "done": {
      const payload = event.payload
      if (!isPending(s)) {
        // Evidence after settlement (journal draining): fill only what is still unknown.
        const filled: TurnState = {
          ...s,
          done: s.done ?? payload,
          continuity: fillContinuity(s.continuity, continuityOf(payload)),
          usage: s.usage ?? payload.usage
        }
        return refresh(filled)
      }
      const next: TurnState = {
        ...s,
        done: payload,
        continuity: { ...s.continuity, ...continuityOf(payload) },
        usage: payload.usage ?? s.usage
      }
      return settleFromDone(next)
    }
    default:
      return s
  }
}

const onCancelReceipt = (s: TurnState, deliveryId: string, ack: Interaction.InteractionDecisionAckPayload): TurnState => {
  const cancel: CancelState = { phase: "resolved", delivery_id: deliveryId }
  const outcome = ack.outcome
  if (!isPending(s)) {
    if (!ack.applied || outcome === undefined) return { ...s, cancel }
    return refresh({
      ...s,
      cancel,
      continuity: fillContinuity(s.continuity, continuityOf(outcome)),
      usage: s.usage ?? outcome.usage
    })
  }
  if (ack.applied) {
    // The receipt owns the terminal outcome: its continuity snapshot is authoritative over earlier frames.
    const base: TurnState = outcome === undefined
      ? { ...s, cancel }
      : {
        ...s,
        cancel,
        continuity: fillContinuity(continuityOf(outcome), s.continuity),
        usage: outcome.usage ?? s.usage
      }
    return settle(base, { status: "cancelled", cancel_delivery_id: deliveryId })
  }
  const code = ack.error_code as ErrorCodes.CancelErrorCode | undefined
  if (code === "run_inactive" && s.done !== undefined) {
    // The Run had already completed; the done decides.
    return settleFromDone({ ...s, cancel })
  }
  return settle(
    { ...s, cancel },
    {
      status: "failed",
      error_code: "cancel_unconfirmed",
      cancel_delivery_id: deliveryId,
      ...(code === undefined ? {} : { cancel_error_code: code })
    }
  )
}

/** Applies one fact. Pure; facts after settlement only add evidence and never change status or error_code. */
export const step = (s: TurnState, fact: TurnFact): TurnState => {
  switch (fact._tag) {
    case "AdmissionRejected": {
      if (!isPending(s)) return s
      switch (fact.rejection) {
        case "capabilities_unknown":
          return { ...s, resolution: { _tag: "Unclaimed", reason: "capabilities_unknown" } }
        case "harness_unavailable":
          return { ...s, resolution: { _tag: "Unclaimed", reason: "harness_unavailable" } }
        default:
          return settle(s, { status: "failed", error_code: fact.rejection, detail: fact.detail })
      }
    }
    case "Dispatching":
      switch (fact.type) {
        case "execution_prepare":
          return { ...s, prepareMaybeSent: true }
        case "execution_start":
        case "prompt_request":
          return { ...s, runMaybeSent: true }
        default:
          return s
      }
    case "Dispatched":
      switch (fact.type) {
        case "execution_prepare":
          return { ...s, prepareSent: true }
        case "execution_start":
          return { ...s, startSent: true }
        case "prompt_request":
          return { ...s, directSent: true }
        case "prompt_cancel":
          // Without a delivery id it is a best-effort abort with no receipt: it owns nothing.
          if (fact.delivery_id === undefined || !isPending(s) || s.cancel !== undefined) return s
          return { ...s, cancel: { phase: "pending", delivery_id: fact.delivery_id } }
        case "prompt_steer": {
          if (fact.input_id === undefined || s.inputs.has(fact.input_id)) return s
          const inputs = new Map(s.inputs)
          inputs.set(fact.input_id, "sent")
          return { ...s, inputs }
        }
        default:
          return s
      }
    case "NotDispatched": {
      if (!isPending(s)) return s
      if (fact.type === "execution_prepare" || fact.type === "execution_start" || fact.type === "prompt_request") {
        return settle(s, { status: "failed", error_code: "delivery_failed", detail: fact.reason })
      }
      return s
    }
    case "PreparationStatus":
      return onPreparation(s, fact.status)
    case "PreparationObservationEnded":
      // After start was (or may have been) sent the Run subscription decides.
      return s.startSent || s.runMaybeSent ? s : observationEnded(s, fact.reason)
    case "RunEvent":
      return onRunEvent(s, fact.event)
    case "RunObservationEnded":
      return observationEnded(s, fact.reason)
    case "CancelReceipt":
      return onCancelReceipt(s, fact.delivery_id, fact.ack)
    case "CancelUnconfirmed": {
      const cancel: CancelState = { phase: "resolved", delivery_id: fact.delivery_id }
      if (!isPending(s)) return { ...s, cancel }
      return settle(
        { ...s, cancel },
        { status: "failed", error_code: "cancel_unconfirmed", cancel_delivery_id: fact.delivery_id }
      )
    }
    case "InputWritten": {
      if (!s.inputs.has(fact.input_id)) return s
      const inputs = new Map(s.inputs)
      inputs.set(fact.input_id, "written")
      return { ...s, inputs }
    }
    case "InputAccepted":
    case "InputRejected": {
      if (!s.inputs.has(fact.input_id)) return s
      const inputs = new Map(s.inputs)
      inputs.delete(fact.input_id)
      return settleFromDone({ ...s, inputs })
    }
    case "InputUnknown":
      if (!s.inputs.has(fact.input_id) || !isPending(s)) return s
      return settleFromDone(inputUnknown(s, fact.input_id))
    case "Abandoned":
      if (!isPending(s) || s.startSent) return { ...s, abandoned: true }
      return settle({ ...s, abandoned: true }, { status: "cancelled" })
  }
}

/** The resolution the facts so far establish. */
export const resolve = (s: TurnState): TurnResolution => s.resolution

/** True when nothing else can change the status (the Turn settled or stays unclaimed). */
export const isResolved = (s: TurnState): boolean => s.resolution._tag !== "Pending"

/** Whether a cancellation or an in-flight input still holds the settlement. */
export const awaiting = (s: TurnState): { readonly cancel: boolean; readonly inputs: ReadonlyArray<string> } => ({
  cancel: s.cancel?.phase === "pending",
  inputs: [...s.inputs.keys()]
})

/** Folds a journal of facts (delivery and restart replay use this one projection). */
export const project = (facts: Iterable<TurnFact>): TurnResolution => {
  let s = initial
  for (const fact of facts) s = step(s, fact)
  return s.resolution
}

// ---------------------------------------------------------------------------------------------- typed results

/** The journal fact of an admission refusal (its detail keeps what `toResult` needs to rebuild the error). */
export const admissionFact = (rejection: AdmissionRejection | ConfigurationRejected): TurnFact => {
  switch (rejection._tag) {
    case "CapabilitiesUnknown":
      return { _tag: "AdmissionRejected", rejection: "capabilities_unknown", detail: rejection.kind }
    case "HarnessUnavailable":
      return { _tag: "AdmissionRejected", rejection: "harness_unavailable", detail: rejection.reason }
    case "BindingInvalid":
      return { _tag: "AdmissionRejected", rejection: "binding_invalid", detail: rejection.reason }
    case "CapabilityUnsupported":
      return {
        _tag: "AdmissionRejected",
        rejection: "capability_unsupported",
        detail: `${rejection.source}:${rejection.capability}`
      }
    case "ConfigurationRejected":
      return { _tag: "AdmissionRejected", rejection: "configuration_rejected", detail: rejection.issue }
  }
}

/** Every error a Turn's `result` can fail with. */
export type TurnError =
  | CapabilitiesUnknown
  | HarnessUnavailable
  | BindingInvalid
  | CapabilityUnsupported
  | ConfigurationRejected
  | PreparationRejected
  | PreparationFailed
  | PreparationUnknown
  | DeliveryRefused
  | DeliveryUnknown
  | ExecutionUnknown
  | ExecutionFailed
  | InputOutcomeUnknown
  | CancelUnconfirmed

/**
 * Maps a resolution to the typed error channel: `completed` and `cancelled` succeed with the outcome, every
 * other resolution fails with the error that says what is known. `Pending` is a programmer error.
 */
export const toResult = (
  runId: string,
  kind: string,
  resolution: TurnResolution
): { readonly _tag: "Success"; readonly outcome: TurnOutcome } | { readonly _tag: "Failure"; readonly error: TurnError } => {
  const fail = (error: TurnError) => ({ _tag: "Failure" as const, error })
  if (resolution._tag === "Pending") throw new globalThis.Error("toResult: the Turn has not resolved yet")
  if (resolution._tag === "Unclaimed") {
    return resolution.reason === "preparation_capacity"
      ? fail(new PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" }))
      : resolution.reason === "capabilities_unknown"
      ? fail(new CapabilitiesUnknown({ kind }))
      : fail(new HarnessUnavailable({ kind, reason: "unavailable" }))
  }
  const o = resolution.outcome
  if (o.status !== "failed") return { _tag: "Success", outcome: o }
  const reason: ObservationEnd = o.observation ?? "disconnected"
  switch (o.error_code) {
    case "delivery_failed":
      return fail(new DeliveryRefused({ run_id: runId, reason: o.detail ?? "not_sent" }))
    case "delivery_unknown":
      return fail(new DeliveryUnknown({ run_id: runId, reason }))
    case "event_stream_incomplete":
      return fail(new ExecutionUnknown({ run_id: runId, reason }))
    case "preparation_rejected":
      return fail(
        new PreparationRejected({
          operation: o.preparation_operation ?? "execution_prepare",
          code: o.preparation_error_code ?? "invalid_request"
        })
      )
    case "preparation_failed":
      return fail(
        new PreparationFailed({
          state: "failed",
          ...(o.preparation_error_code === undefined ? {} : { code: o.preparation_error_code })
        })
      )
    case "preparation_expired":
      return fail(new PreparationFailed({ state: "expired" }))
    case "preparation_interrupted":
      return fail(new PreparationUnknown({ reason }))
    case "input_outcome_unknown":
      return fail(new InputOutcomeUnknown({ run_id: runId, input_id: o.unknown_input_id ?? "", reason: "turn_ended" }))
    case "cancel_unconfirmed":
      return fail(
        new CancelUnconfirmed({
          run_id: runId,
          delivery_id: o.cancel_delivery_id ?? "",
          reason: o.cancel_error_code !== undefined ? "not_applied" : o.observation !== undefined ? "connection_lost" : "no_receipt",
          ...(o.cancel_error_code === undefined ? {} : { code: o.cancel_error_code })
        })
      )
    case "capability_unsupported": {
      // detail is "<source>:<capability>" (see admissionFact)
      const [source, capability] = (o.detail ?? "declaration:streaming").split(":")
      return fail(
        new CapabilityUnsupported({
          kind,
          capability: capability as Capabilities.CapabilityName,
          source: source === "engine_profile" ? "engine_profile" : "declaration"
        })
      )
    }
    case "binding_invalid":
      return fail(new BindingInvalid({ reason: (o.detail ?? "missing_binding") as BindingInvalidReason }))
    case "configuration_rejected":
      return fail(new ConfigurationRejected({ issue: o.detail ?? "invalid" }))
    default:
      // engine_failed (or no Core code on a failed outcome)
      return fail(
        new ExecutionFailed({
          run_id: runId,
          ...(o.engine_error_code === undefined ? {} : { engine_error_code: o.engine_error_code }),
          ...(o.engine_http_status === undefined ? {} : { engine_http_status: o.engine_http_status })
        })
      )
  }
}
