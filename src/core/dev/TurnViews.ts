/**
 * What the dev Core's Turn operations answer with: the stored Turn as a view, and what each dispatching
 * operation proved (steer, cancel, answers). Plain data for the operator API; no behaviour.
 */
import type { Schema } from "effect"
import * as Outcome from "../Outcome.js"
import type { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, OperatorUnavailable } from "./OperatorErrors.js"
import type { InputRecord, InteractionRecord, TurnRecord } from "./TurnStore.js"

export interface TurnView {
  readonly turn_id: string
  readonly session_id: string
  readonly run_id: string
  readonly device_id: string | null
  readonly status: TurnRecord["status"]
  readonly attempt: number
  readonly input_cursor: number
  readonly created_at_ms: number
  readonly dispatched_at_ms: number | null
  readonly completed_at_ms: number | null
  /**
   * The projected outcome once terminal (status, error_code, observation, usage, …); the engine category only
   * for a failed Turn whose error is `engine_failed` (`Outcome.diagnosticOutcome`).
   */
  readonly outcome: Outcome.TurnOutcome | null
}

export const turnView = (turn: TurnRecord): TurnView => ({
  turn_id: turn.turnId,
  session_id: turn.sessionId,
  run_id: turn.runId,
  device_id: turn.deviceId ?? null,
  status: turn.status,
  attempt: turn.attempt,
  input_cursor: turn.inputCursor,
  created_at_ms: turn.createdAtMs,
  dispatched_at_ms: turn.dispatchedAtMs ?? null,
  completed_at_ms: turn.completedAtMs ?? null,
  outcome: turn.outcome === undefined ? null : Outcome.diagnosticOutcome(turn.outcome)
})

export const inputView = (i: InputRecord) => ({
  input_id: i.inputId,
  status: i.status,
  error_code: i.errorCode ?? null,
  position: i.position ?? null,
  created_at_ms: i.createdAtMs,
  updated_at_ms: i.updatedAtMs
})

export const interactionView = (i: InteractionRecord) => ({
  kind: i.kind,
  interaction_id: i.interactionId,
  status: i.status,
  request: i.request,
  delivery_id: i.deliveryId ?? null,
  outcome: i.outcome ?? null,
  outcome_error_code: i.outcomeErrorCode ?? null,
  created_at_ms: i.createdAtMs,
  answered_at_ms: i.answeredAtMs ?? null
})

export type TurnDetail = TurnView & {
  readonly inputs: ReadonlyArray<ReturnType<typeof inputView>>
  readonly interactions: ReadonlyArray<ReturnType<typeof interactionView>>
}

/** What a steer proved. */
export type SteerResult =
  | { readonly input_id: string; readonly status: "accepted"; readonly position: number }
  | { readonly input_id: string; readonly status: "rejected"; readonly error_code: string; readonly retryable: boolean }
  | { readonly input_id: string; readonly status: "unknown"; readonly reason: string }

/** What a cancellation proved. */
export type CancelResult =
  | { readonly status: "cancelled"; readonly delivery_id: string | null; readonly abandoned: boolean }
  | { readonly status: "rejected"; readonly delivery_id: string; readonly error_code: string }
  | { readonly status: "unconfirmed"; readonly delivery_id: string; readonly reason: string; readonly error_code: string | null }

/** What an answer (decision or function result) proved. */
export type AnswerResult =
  | { readonly interaction_id: string; readonly delivery_id: string; readonly outcome: "applied" }
  | { readonly interaction_id: string; readonly delivery_id: string; readonly outcome: "rejected"; readonly error_code: string; readonly retryable: boolean }
  | { readonly interaction_id: string; readonly delivery_id: string; readonly outcome: "unknown"; readonly reason: string }

export interface PermissionAnswerBody {
  readonly approved: boolean
  readonly message?: string
  readonly updated_input?: { readonly [x: string]: Schema.Json }
}

export interface UserChoiceAnswerBody {
  readonly question_answers?: ReadonlyArray<{ readonly question_id: string; readonly answers: ReadonlyArray<string> }>
  readonly cancelled?: boolean
  readonly reason?: string
}

export type TurnOperationError = OperatorRequestInvalid | OperatorNotFound | OperatorConflict | OperatorUnavailable
