/**
 * Finite error codes of every family, as literal schemas (decode rejects any other string) and literal
 * union types. Codes are wire facts from the 0.10.0 reference; where we added one, docs/wire-decisions.md
 * says why.
 */
import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------- engine failures

/**
 * Neutral engine-failure categories an adapter may put on a Run's error frame. Only `connection_failed`
 * keeps `http_status` (an integer 100..599). Unknown or malformed values leave the error unclassified.
 */
export const EngineFailureCode = Schema.Literals([
  "authentication_error",
  "rate_limit_exceeded",
  "usage_limit_exceeded",
  "server_overloaded",
  "server_error",
  "invalid_request",
  "resource_not_found",
  "request_timeout",
  "context_length_exceeded",
  "cyber_policy",
  "connection_failed"
])
export type EngineFailureCode = typeof EngineFailureCode.Type

// ---------------------------------------------------------------------------------------------- preparation

/** Codes of `preparation_status` (rejected control replies and failed resource statuses). */
export const PreparationErrorCode = Schema.Literals([
  // execution_prepare rejections
  "invalid_request",
  "invalid_configuration",
  "resource_unavailable",
  "unsupported_preparation",
  "unsupported_read_preparation",
  "unsupported_configuration",
  "request_conflict",
  "preparation_capacity",
  "session_binding_conflict",
  "configuration_conflict",
  "executor_cleanup_unconfirmed",
  "native_session_conflict",
  "history_unavailable",
  "executor_capacity",
  // execution_release rejections
  "invalid_release",
  "unknown_preparation",
  // execution_start rejections
  "invalid_start",
  "read_only_preparation",
  "unknown_executor",
  "start_conflict",
  "preparation_not_ready",
  "run_conflict",
  "executor_unavailable",
  "start_cancelled",
  // failed resource statuses
  "preparation_failed",
  "status_delivery_failed",
  "connection_closed",
  "cleanup_unconfirmed"
])
export type PreparationErrorCode = typeof PreparationErrorCode.Type

/** The only preparation rejection whose own contract makes a retry safe: the Turn stays unclaimed. */
export const isRetrySafePreparationCode = (code: PreparationErrorCode): boolean => code === "preparation_capacity"

// ---------------------------------------------------------------------------------------------- active input

/** Codes of `prompt_steer_ack`. */
export const SteerErrorCode = Schema.Literals([
  "not_ready",
  "busy",
  "in_flight",
  "invalid_input",
  "run_inactive",
  "input_conflict",
  "input_limit",
  "unsupported",
  "contract_violation",
  "rejected",
  "outcome_unknown"
])
export type SteerErrorCode = typeof SteerErrorCode.Type

/** Steer codes after which the identical payload may be delivered again (the input was not admitted). */
export const isRetryableSteerCode = (code: SteerErrorCode): boolean => code === "not_ready" || code === "busy"

// ---------------------------------------------------------------------------------------------- acknowledgements

/** Codes of `interaction_decision_ack` for permission and user-choice decisions. */
export const DecisionErrorCode = Schema.Literals([
  "not_pending",
  "not_ready",
  "unsupported",
  "contract_violation",
  "runtime_error",
  "decision_conflict",
  "invalid_decision"
])
export type DecisionErrorCode = typeof DecisionErrorCode.Type

/** Codes of `interaction_decision_ack` for function results. */
export const FunctionResultErrorCode = Schema.Literals([
  "invalid_result",
  "not_ready",
  "unsupported",
  "contract_violation",
  "not_pending",
  "runtime_error",
  "decision_conflict"
])
export type FunctionResultErrorCode = typeof FunctionResultErrorCode.Type

/** Codes of `interaction_decision_ack` answering a `prompt_cancel` (the cancellation receipt). */
export const CancelErrorCode = Schema.Literals([
  "run_inactive",
  "cancel_timeout",
  "cancel_failed",
  "cancel_output_unavailable",
  "cancel_outcome_unavailable",
  "not_ready"
])
export type CancelErrorCode = typeof CancelErrorCode.Type

/** Every code an `interaction_decision_ack` may carry (one frame type serves four families). */
export const AckErrorCode = Schema.Literals([
  "not_pending",
  "not_ready",
  "unsupported",
  "contract_violation",
  "runtime_error",
  "decision_conflict",
  "invalid_decision",
  "invalid_result",
  "run_inactive",
  "cancel_timeout",
  "cancel_failed",
  "cancel_output_unavailable",
  "cancel_outcome_unavailable"
])
export type AckErrorCode = typeof AckErrorCode.Type
// The ack union is exactly the three families; the compiler checks both directions.
type _AckCovers = [DecisionErrorCode | FunctionResultErrorCode | CancelErrorCode] extends [AckErrorCode] ? true : never
type _AckExact = [AckErrorCode] extends [DecisionErrorCode | FunctionResultErrorCode | CancelErrorCode] ? true : never
export const _ackErrorCodeIsExact: [_AckCovers, _AckExact] = [true, true]

// ---------------------------------------------------------------------------------------------- transfers

/** Codes of `runtime_prepare_result`, each valid only with its outcome (see RuntimePrepare.validateResult). */
export const RuntimePrepareErrorCode = Schema.Literals([
  "invalid_request",
  "resource_unavailable",
  "runtime_preparation_capacity",
  "runtime_preparation_unsupported",
  "runtime_preparation_rejected",
  "runtime_preparation_failed",
  "runtime_preparation_unconfirmed"
])
export type RuntimePrepareErrorCode = typeof RuntimePrepareErrorCode.Type

/** Codes of `workspace_read_result`. */
export const ReadErrorCode = Schema.Literals([
  "invalid_request",
  "resource_unavailable",
  "read_capacity",
  "read_unsupported",
  "not_found",
  "permission_denied",
  "not_directory",
  "read_unconfirmed"
])
export type ReadErrorCode = typeof ReadErrorCode.Type

/** Codes of `workspace_write_result`. */
export const WriteErrorCode = Schema.Literals([
  "invalid_request",
  "resource_unavailable",
  "write_capacity",
  "write_unsupported",
  "write_rejected",
  "write_unconfirmed"
])
export type WriteErrorCode = typeof WriteErrorCode.Type

/** Codes of `workspace_export_result`. */
export const ExportErrorCode = Schema.Literals(["invalid_request", "export_failed", "resource_unavailable", "read_unsupported"])
export type ExportErrorCode = typeof ExportErrorCode.Type

/** Codes of `environment_quiesced` / `environment_resumed`. */
export const SuspensionErrorCode = Schema.Literals(["invalid_request", "resource_busy", "not_suspended"])
export type SuspensionErrorCode = typeof SuspensionErrorCode.Type

// ---------------------------------------------------------------------------------------------- HTTP routes

/** `error` codes of the machine routes' JSON body `{error, detail}`. */
export const HttpErrorCode = Schema.Literals([
  "missing_params",
  "missing_device_id",
  "bad_json",
  "missing_bearer",
  "unknown_device",
  "bad_credential",
  "wrong_runtime_type",
  "method_not_allowed",
  "incompatible_version",
  "internal"
])
export type HttpErrorCode = typeof HttpErrorCode.Type

/** The JSON body of every machine-route error. */
export const HttpErrorBody = Schema.Struct({ error: HttpErrorCode, detail: Schema.String })
export type HttpErrorBody = typeof HttpErrorBody.Type
