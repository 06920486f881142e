/**
 * The error classes of Core's operations (protocol "Failures, retries and cleanup", "What each
 * acknowledgement proves"), named by what is known: `…Rejected` / `…Invalid` definite and before any effect,
 * `…Failed` definite after it ran, `…Unknown` / `…Unconfirmed` dispatched without proof. One section per
 * family (admission, delivery, active input, cancellation, interactions, functions). `Outcome.ts` re-exports
 * all of them, so `Outcome.X` keeps working; the projection lives there.
 *
 * Never: one generic tag mixing Unknown and Failed.
 */
import { Schema } from "effect"
import { Capabilities, ErrorCodes, Preparation } from "../proto/index.js"
import { ObservationLostReason } from "./Errors.js"

// ---------------------------------------------------------------------------------------------- admission errors

/**
 * No heartbeat yet on the selected connection: nothing is declared, so nothing is admitted. Definite, nothing
 * sent (a check before sending, hence not `…Unknown`).
 */
export class CapabilitiesUndeclared extends Schema.TaggedError<CapabilitiesUndeclared>()("CapabilitiesUndeclared", {
  kind: Schema.String
}) {
  override get message() {
    return `capabilities of ${this.kind} are not declared yet (no heartbeat yet)`
  }
}

/** The Harness kind is not advertised or not available on the selected connection. Definite, nothing sent. */
export class HarnessUnavailable extends Schema.TaggedError<HarnessUnavailable>()("HarnessUnavailable", {
  kind: Schema.String,
  reason: Schema.Literals(["not_advertised", "unavailable"])
}) {
  override get message() {
    return `harness ${this.kind} is ${this.reason === "unavailable" ? "unavailable" : "not advertised"}`
  }
}

/** Why an Environment binding cannot be used for the operation. */
export const BindingInvalidReason = Schema.Literals([
  "missing_binding", // a hosted Environment type without its exact binding
  "no_workspace_binding", // an idle Files read on an Environment of type none
  "mcp_origin_service", // a service-origin MCP server needs Environment type none
  "mcp_origin_environment" // an environment-origin MCP server needs a networked local binding
])
export type BindingInvalidReason = typeof BindingInvalidReason.Type

/** The Environment binding is invalid for this request. Definite, nothing sent; never select another Harness. */
export class BindingInvalid extends Schema.TaggedError<BindingInvalid>()("BindingInvalid", {
  reason: BindingInvalidReason
}) {
  override get message() {
    return `environment binding invalid (${this.reason})`
  }
}

/**
 * A capability Core requires is not declared by the Runtime (`declaration`) or not qualified by the Harness's
 * engine profile (`engine_profile`). Definite, nothing sent; never select another Harness.
 */
export class CapabilityUnsupported extends Schema.TaggedError<CapabilityUnsupported>()("CapabilityUnsupported", {
  kind: Schema.String,
  capability: Schema.Literals(Capabilities.capabilityNames),
  source: Schema.Literals(["declaration", "engine_profile"])
}) {
  override get message() {
    return `${this.kind} does not support ${this.capability} (${this.source})`
  }
}

/** The request Core built violates a shared configuration or input rule. Definite, nothing sent (a Core bug or bad Agent). */
export class ConfigurationRejected extends Schema.TaggedError<ConfigurationRejected>()("ConfigurationRejected", {
  issue: Schema.String
}) {
  override get message() {
    return `configuration rejected (${this.issue})`
  }
}

/** Every definite refusal of the admission policy. */
export type AdmissionRejection = CapabilitiesUndeclared | HarnessUnavailable | BindingInvalid | CapabilityUnsupported

// ---------------------------------------------------------------------------------------------- delivery errors

/** The Runtime refused a control operation (`rejected` status). Definite; only `preparation_capacity` is retry-safe. */
export class PreparationRejected extends Schema.TaggedError<PreparationRejected>()("PreparationRejected", {
  operation: Preparation.ControlOperation,
  code: ErrorCodes.PreparationErrorCode
}) {
  /** True only for a `preparation_capacity` refusal of execution_prepare: the Turn stays unclaimed for retry. */
  get isRetrySafe(): boolean {
    return this.operation === "execution_prepare" && ErrorCodes.isRetrySafePreparationCode(this.code)
  }
  override get message() {
    return `${this.operation} rejected (${this.code})`
  }
}

/** The admission ended before start (`failed`, `expired`, or `released` without Core asking). Definite, no Run input submitted. */
export class PreparationFailed extends Schema.TaggedError<PreparationFailed>()("PreparationFailed", {
  state: Schema.Literals(["failed", "expired", "released"]),
  code: Schema.optionalKey(ErrorCodes.PreparationErrorCode)
}) {
  override get message() {
    return `preparation ${this.state}${this.code === undefined ? "" : ` (${this.code})`}`
  }
}

/**
 * Why observation ended: a connection-level reason, this subscriber's own overflow, or `journal_unavailable`
 * (the dev Core stopped observing because it could not persist what it observed).
 */
export const ObservationEnd = Schema.Literals([
  ...ObservationLostReason.literals,
  "subscriber_overflow",
  "journal_unavailable",
  "preparation_timeout" // no ready (or confirmed release) within the preparation budget (DeliveryOptions)
])
export type ObservationEnd = typeof ObservationEnd.Type

/**
 * Observation ended during preparation, after a status proved the Runtime owned it and before Core sent
 * execution_start. No Run input was submitted; the admission's own fate is unknown (connection-local).
 */
export class PreparationUnknown extends Schema.TaggedError<PreparationUnknown>()("PreparationUnknown", {
  reason: ObservationEnd
}) {
  override get message() {
    return `preparation outcome unknown (${this.reason})`
  }
}

/** A request entered the send queue and observation ended before any reply proved delivery. The native effect is unknown. */
/**
 * The admission failed and the Runtime reported that its cleanup is not confirmed (`failed` with
 * `cleanup_unconfirmed` / `executor_cleanup_unconfirmed`): the Runtime keeps ownership of the resource and
 * retries; no confirmed release (`released` / `expired`) arrived while Core observed (`reason`). Nothing ran.
 */
export class PreparationCleanupUnconfirmed extends Schema.TaggedError<PreparationCleanupUnconfirmed>()(
  "PreparationCleanupUnconfirmed",
  { code: ErrorCodes.PreparationErrorCode, reason: ObservationEnd }
) {
  override get message() {
    return `preparation failed (${this.code}); cleanup not confirmed (${this.reason})`
  }
}

export class DeliveryUnknown extends Schema.TaggedError<DeliveryUnknown>()("DeliveryUnknown", {
  run_id: Schema.String,
  reason: ObservationEnd
}) {
  override get message() {
    return `delivery of run ${this.run_id} unknown (${this.reason})`
  }
}

/** The Run was observed and its event stream ended without `done`. The native effect is unknown, not failed. */
export class ExecutionUnknown extends Schema.TaggedError<ExecutionUnknown>()("ExecutionUnknown", {
  run_id: Schema.String,
  reason: ObservationEnd
}) {
  override get message() {
    return `run ${this.run_id} outcome unknown: event stream incomplete (${this.reason})`
  }
}

/** The Run reported an execution error and completed with `done`. Definite; the classification is metadata. */
export class ExecutionFailed extends Schema.TaggedError<ExecutionFailed>()("ExecutionFailed", {
  run_id: Schema.String,
  engine_error_code: Schema.optionalKey(ErrorCodes.EngineFailureCode),
  engine_http_status: Schema.optionalKey(Schema.Int)
}) {
  override get message() {
    return `run ${this.run_id} failed${this.engine_error_code === undefined ? "" : ` (${this.engine_error_code})`}`
  }
}

// ---------------------------------------------------------------------------------------------- active input errors

/** The input is invalid or needs a capability the Turn was not admitted with. Definite, nothing sent; the cursor stays. */
export class InputInvalid extends Schema.TaggedError<InputInvalid>()("InputInvalid", {
  run_id: Schema.String,
  input_id: Schema.String,
  issue: Schema.String
}) {
  override get message() {
    return `input ${this.input_id} invalid (${this.issue})`
  }
}

/**
 * The Runtime definitely did not apply the input (a receipt error code). The cursor stays. `isRetryable`
 * (not_ready, busy) means the identical payload may be delivered again later.
 */
export class InputRejected extends Schema.TaggedError<InputRejected>()("InputRejected", {
  run_id: Schema.String,
  input_id: Schema.String,
  code: ErrorCodes.SteerErrorCode
}) {
  get isRetryable(): boolean {
    return ErrorCodes.isRetryableSteerCode(this.code)
  }
  override get message() {
    return `input ${this.input_id} rejected (${this.code})`
  }
}

/** Why an active input's outcome is unknown. */
export const InputUnknownReason = Schema.Literals([
  "written_ack_timeout", // no `written` within 30 s of delivery
  "connection_lost", // the receipt stream ended with the connection
  "receipt_overflow", // this waiter fell behind its buffer
  "runtime_outcome_unknown", // the Runtime itself reported outcome_unknown
  "turn_ended" // the Turn ended before `accepted`
])
export type InputUnknownReason = typeof InputUnknownReason.Type

/** The input was dispatched and its outcome is unknown. Never a failure; never redelivered automatically; the cursor stays. */
export class InputOutcomeUnknown extends Schema.TaggedError<InputOutcomeUnknown>()("InputOutcomeUnknown", {
  run_id: Schema.String,
  input_id: Schema.String,
  reason: InputUnknownReason
}) {
  override get message() {
    return `input ${this.input_id} outcome unknown (${this.reason})`
  }
}

// ---------------------------------------------------------------------------------------------- cancellation errors

/** The Runtime answered the cancellation with `run_inactive`: no such active Run. Definite; nothing was cancelled. */
export class CancelRejected extends Schema.TaggedError<CancelRejected>()("CancelRejected", {
  run_id: Schema.String,
  delivery_id: Schema.String,
  code: Schema.Literal("run_inactive")
}) {
  override get message() {
    return `cancellation of ${this.run_id} rejected (${this.code})`
  }
}

/**
 * Cancellation was sent and not proven: no receipt within 15 s, the connection ended, or the Runtime answered
 * that it could not confirm it (`not_applied` with `code`: cancel_timeout, an unavailable outcome, not_ready;
 * `run_inactive` is `CancelRejected`, `cancel_failed` is `CancelFailed`). Cancellation may have happened; this neither establishes success nor
 * authorizes another execution.
 */
export class CancelUnconfirmed extends Schema.TaggedError<CancelUnconfirmed>()("CancelUnconfirmed", {
  run_id: Schema.String,
  delivery_id: Schema.String,
  reason: Schema.Literals(["no_receipt", "connection_lost", "receipt_overflow", "not_applied"]),
  code: Schema.optionalKey(ErrorCodes.CancelErrorCode)
}) {
  override get message() {
    return `cancellation of ${this.run_id} unconfirmed (${this.code ?? this.reason})`
  }
}

/**
 * The Runtime answered the cancellation with `cancel_failed`: a definite receipt that it tried and could not
 * stop the Run. Nothing was cancelled; the Run's own outcome follows from its events.
 */
export class CancelFailed extends Schema.TaggedError<CancelFailed>()("CancelFailed", {
  run_id: Schema.String,
  delivery_id: Schema.String,
  code: Schema.Literal("cancel_failed")
}) {
  override get message() {
    return `cancellation of run ${this.run_id} failed (cancel_failed)`
  }
}

// ---------------------------------------------------------------------------------------------- interaction errors

/** A decision failed local validation before any send (shape or binding to the emitted questions). Definite. */
export class DecisionInvalid extends Schema.TaggedError<DecisionInvalid>()("DecisionInvalid", {
  interaction_id: Schema.String,
  issue: Schema.Literals([
    "invalid_shape",
    "cancelled_with_answers",
    "blank_question_id",
    "duplicate_question_id",
    "unknown_question_id"
  ])
}) {
  override get message() {
    return `decision for ${this.interaction_id} invalid (${this.issue})`
  }
}

/** The Runtime answered `applied: false` with a code. Definite. `isRetryable` for not_ready / runtime_error. */
export class InteractionRejected extends Schema.TaggedError<InteractionRejected>()("InteractionRejected", {
  interaction_id: Schema.String,
  delivery_id: Schema.String,
  code: ErrorCodes.DecisionErrorCode
}) {
  get isRetryable(): boolean {
    return this.code === "not_ready" || this.code === "runtime_error"
  }
  override get message() {
    return `decision for ${this.interaction_id} not applied (${this.code})`
  }
}

/** Why an acknowledgement never arrived. */
export const AckUnknownReason = Schema.Literals(["no_receipt", "connection_lost", "receipt_overflow"])
export type AckUnknownReason = typeof AckUnknownReason.Type

/** The decision was sent and no correlated acknowledgement arrived. Success is never inferred; the interaction stays retryable. */
export class InteractionAckUnknown extends Schema.TaggedError<InteractionAckUnknown>()("InteractionAckUnknown", {
  interaction_id: Schema.String,
  delivery_id: Schema.String,
  reason: AckUnknownReason
}) {
  override get message() {
    return `decision ack for ${this.interaction_id} unknown (${this.reason})`
  }
}

// ---------------------------------------------------------------------------------------------- function errors

/**
 * A function result failed local validation (content shape, a blank image reference, an image outside the
 * public inline profile). Definite, nothing sent.
 */
export class FunctionResultInvalid extends Schema.TaggedError<FunctionResultInvalid>()("FunctionResultInvalid", {
  run_id: Schema.String,
  call_id: Schema.String,
  issue: Schema.Literals([
    "blank_image_url",
    "images_unsupported",
    "invalid_shape",
    "image_media_type",
    "image_base64",
    "image_format_mismatch"
  ])
}) {
  override get message() {
    return `function result for ${this.call_id} invalid (${this.issue})`
  }
}

/** Another function_result of this Run is still awaiting its acknowledgement. Definite, nothing sent. */
export class FunctionResultOutstanding extends Schema.TaggedError<FunctionResultOutstanding>()(
  "FunctionResultOutstanding",
  { run_id: Schema.String, call_id: Schema.String }
) {
  override get message() {
    return `a function result of run ${this.run_id} is still outstanding`
  }
}

/** The Runtime answered `applied: false`. Definite. `isRetryable` for not_ready / runtime_error. */
export class FunctionResultRejected extends Schema.TaggedError<FunctionResultRejected>()("FunctionResultRejected", {
  run_id: Schema.String,
  call_id: Schema.String,
  delivery_id: Schema.String,
  code: ErrorCodes.FunctionResultErrorCode
}) {
  get isRetryable(): boolean {
    return this.code === "not_ready" || this.code === "runtime_error"
  }
  override get message() {
    return `function result for ${this.call_id} not applied (${this.code})`
  }
}

/** The function result was sent and no correlated acknowledgement arrived. Success is never inferred. */
export class FunctionResultUnknown extends Schema.TaggedError<FunctionResultUnknown>()("FunctionResultUnknown", {
  run_id: Schema.String,
  call_id: Schema.String,
  delivery_id: Schema.String,
  reason: AckUnknownReason
}) {
  override get message() {
    return `function result ack for ${this.call_id} unknown (${this.reason})`
  }
}

/** The Turn already settled (or never started); the operation was not sent. Definite. */
export class TurnNotActive extends Schema.TaggedError<TurnNotActive>()("TurnNotActive", {
  run_id: Schema.String
}) {
  override get message() {
    return `turn ${this.run_id} is not active`
  }
}

// ---------------------------------------------------------------------------------------------- typed result errors

/** The first request of the Turn never entered the send queue. Definite: nothing was sent. */
export class DeliveryRefused extends Schema.TaggedError<DeliveryRefused>()("DeliveryRefused", {
  run_id: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `delivery of run ${this.run_id} refused before sending (${this.reason})`
  }
}
