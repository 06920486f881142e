/**
 * The public Turn outcome (protocol "Native failure classification", "What each acknowledgement proves"):
 * Core's status and error code, the observation reason and native evidence kept apart, and the resolution
 * the projection settles on. A resolution that is not `Pending` carries the typed error that says what is
 * known (`TurnError`), built by the projection from structured evidence.
 */
import { Schema } from "effect"
import { ErrorCodes, Preparation, RunEvents } from "../proto/index.js"
import {
  type BindingInvalid,
  type CancelFailed,
  type CancelUnconfirmed,
  type CapabilitiesUndeclared,
  type CapabilityUnsupported,
  type ConfigurationRejected,
  type DeliveryRefused,
  type DeliveryUnknown,
  type ExecutionFailed,
  type ExecutionUnknown,
  type HarnessUnavailable,
  type InputOutcomeUnknown,
  ObservationEnd,
  type PreparationFailed,
  type PreparationRejected,
  type PreparationCleanupUnconfirmed,
  type PreparationUnknown
} from "./TurnErrors.js"

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
  "cleanup_unconfirmed", // the admission failed and its cleanup was not confirmed while Core observed
  "engine_failed", // the Run reported an execution error, then done
  "input_outcome_unknown", // an active input's outcome is unknown at the end of the Turn
  "cancel_unconfirmed", // cancellation sent and not proven
  "capability_unsupported", // the final admission check refused (definite)
  "binding_invalid",
  "configuration_rejected",
  "initialization_failed", // the Session's environment initialization failed or was refused (definite; nothing dispatched)
  "initialization_unknown" // its outcome is unknown (never replayed); nothing dispatched
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

/**
 * The outcome as session diagnostics show it (protocol "engine failure"): the engine category
 * (`engine_error_code`, `engine_http_status`) is kept in the stored outcome but exposed only for a failed Turn
 * whose Core error is `engine_failed`; for every other outcome it is subordinate evidence and left out.
 */
export const diagnosticOutcome = (outcome: TurnOutcome): TurnOutcome => {
  if (outcome.status === "failed" && outcome.error_code === "engine_failed") return outcome
  if (outcome.engine_error_code === undefined && outcome.engine_http_status === undefined) return outcome
  const { engine_error_code: _code, engine_http_status: _status, ...rest } = outcome
  return rest
}

/** Why a Turn stays unclaimed (nothing was executed; the Worker may retry it). */
export type UnclaimedReason = "preparation_capacity" | "capabilities_undeclared" | "harness_unavailable"

/** Every error a Turn's `result` can fail with. */
export type TurnError =
  | CapabilitiesUndeclared
  | HarnessUnavailable
  | BindingInvalid
  | CapabilityUnsupported
  | ConfigurationRejected
  | PreparationRejected
  | PreparationFailed
  | PreparationUnknown
  | PreparationCleanupUnconfirmed
  | DeliveryRefused
  | DeliveryUnknown
  | ExecutionUnknown
  | ExecutionFailed
  | InputOutcomeUnknown
  | CancelFailed
  | CancelUnconfirmed

/**
 * What the facts so far establish. `Unclaimed` carries the retry-safe refusal; a `Settled` Turn whose status
 * is `failed` carries its typed error (`completed` and `cancelled` carry none).
 */
export type TurnResolution =
  | { readonly _tag: "Pending" }
  | { readonly _tag: "Unclaimed"; readonly reason: UnclaimedReason; readonly error: TurnError }
  | Settled

export type Settled =
  | { readonly _tag: "Settled"; readonly outcome: TurnOutcome & { readonly status: "completed" | "cancelled" } }
  | { readonly _tag: "Settled"; readonly outcome: TurnOutcome & { readonly status: "failed" }; readonly error: TurnError }

/** A resolution the projection has reached (what `toResult` takes). */
export type Resolved = Exclude<TurnResolution, { readonly _tag: "Pending" }>
