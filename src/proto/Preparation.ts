/**
 * Execution admission (protocol "Preparation and execution order"): execution_prepare, execution_start,
 * execution_release and the `preparation_status` replies, with the per-handle revision rule.
 *
 * What a status proves: `preparing` = the Runtime accepted and owns preparation; `ready` = the reservation
 * is ready (no Run input submitted); `started` = admission transferred to the identified Turn, not its
 * completion. `rejected` is a control reply, not a revision: it never replaces the handle's current state.
 */
import { Option, Schema } from "effect"
import { NonNegativeInt } from "./Checks.js"
import { PreparationErrorCode } from "./ErrorCodes.js"
import { PromptRequestPayload } from "./Execution.js"
import { AdmissionHandle, ExecutorId, RunId, SessionId } from "./Ids.js"
import { MessageInput } from "./MessageInput.js"

/** Reserve a per-Turn admission for a Session: immutable configuration, no Run input, no Run id. */
export const ExecutionPreparePayload = Schema.Struct({
  session_id: SessionId,
  configuration: PromptRequestPayload
})
export type ExecutionPreparePayload = typeof ExecutionPreparePayload.Type

/** Transfer a ready reservation to a new Run with its ordered initial input. */
export const ExecutionStartPayload = Schema.Struct({
  executor_id: ExecutorId,
  handle: AdmissionHandle,
  run_id: RunId,
  input: MessageInput
})
export type ExecutionStartPayload = typeof ExecutionStartPayload.Type

/** Abandon an admission before start. It never cancels a Run the admission was transferred to. */
export const ExecutionReleasePayload = Schema.Struct({ handle: AdmissionHandle })
export type ExecutionReleasePayload = typeof ExecutionReleasePayload.Type

export const PreparationState = Schema.Literals([
  "preparing",
  "ready",
  "starting",
  "started",
  "released",
  "expired",
  "failed",
  "rejected"
])
export type PreparationState = typeof PreparationState.Type

/** States that end an admission (a Core subscription closes on them). */
export const terminalStates: ReadonlySet<PreparationState> = new Set(["started", "released", "expired", "failed"])
export const isTerminalState = (state: PreparationState): boolean => terminalStates.has(state)

export const ControlOperation = Schema.Literals(["execution_prepare", "execution_start", "execution_release"])
export type ControlOperation = typeof ControlOperation.Type

/** A preparation status. `revision` is always written (0 on `rejected`). */
export const PreparationStatusPayload = Schema.Struct({
  executor_id: Schema.optionalKey(ExecutorId),
  reused: Schema.optionalKey(Schema.Boolean),
  handle: Schema.optionalKey(AdmissionHandle),
  revision: NonNegativeInt,
  state: PreparationState,
  /** Unix milliseconds; authoritative on the wire; retries never extend it. */
  expires_at: Schema.optionalKey(NonNegativeInt),
  run_id: Schema.optionalKey(RunId),
  error_code: Schema.optionalKey(PreparationErrorCode),
  operation: Schema.optionalKey(ControlOperation)
})
export type PreparationStatusPayload = typeof PreparationStatusPayload.Type

/** Why a status is not well-formed for its state. */
export type StatusIssue =
  | "rejected_shape" // rejected without operation + error_code, or with a revision
  | "missing_handle" // a resource status without a handle or with revision 0
  | "ready_shape" // ready without executor_id / expires_at
  | "run_shape" // starting / started without run_id
  | "failed_shape" // failed without error_code

/** Shape rule of a status for its state (both sides call it: the Runtime before sending, Core on receipt). */
export const validateStatus = (status: PreparationStatusPayload): Option.Option<StatusIssue> => {
  if (status.state === "rejected") {
    return status.operation === undefined || status.error_code === undefined || status.revision !== 0
      ? Option.some("rejected_shape")
      : Option.none()
  }
  if (status.handle === undefined || status.revision < 1) return Option.some("missing_handle")
  if (status.state === "ready" && (status.executor_id === undefined || status.expires_at === undefined)) {
    return Option.some("ready_shape")
  }
  if ((status.state === "starting" || status.state === "started") && status.run_id === undefined) {
    return Option.some("run_shape")
  }
  if (status.state === "failed" && status.error_code === undefined) return Option.some("failed_shape")
  return Option.none()
}

/** What Core has accepted so far for one preparation request id. */
export interface RevisionCursor {
  readonly handle: AdmissionHandle
  readonly revision: number
}

/**
 * Core's revision rule for one preparation request id. A `rejected` status bypasses ordering and changes
 * nothing. A resource status applies only when it has a handle and revision > 0, its handle equals the
 * first handle seen for the request, and its revision is strictly greater than the last accepted one;
 * older, repeated or foreign-handle statuses are ignored.
 */
export const applyRevision = (
  cursor: RevisionCursor | undefined,
  status: PreparationStatusPayload
): { readonly apply: boolean; readonly cursor: RevisionCursor | undefined } => {
  if (status.state === "rejected") return { apply: true, cursor }
  if (status.handle === undefined || status.revision < 1) return { apply: false, cursor }
  if (cursor !== undefined && (status.handle !== cursor.handle || status.revision <= cursor.revision)) {
    return { apply: false, cursor }
  }
  return { apply: true, cursor: { handle: status.handle, revision: status.revision } }
}
