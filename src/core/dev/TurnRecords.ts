/**
 * The records the Turn store keeps (Turns, journal entries, active inputs, interactions) and how a stored row
 * reads back as one. `TurnStore.ts` owns the SQL and the rules.
 */
import type { MessageInput } from "../../proto/MessageInput.js"
import type { TurnOutcome } from "../Outcome.js"
import { toInt, toIntOrUndefined, toStringOrUndefined } from "./StoreErrors.js"

/** `queued`: recorded, the Run not yet dispatched; `running`: execution_start / prompt_request dispatched. */
export type TurnStatus = "queued" | "running" | "completed" | "failed" | "cancelled"
export const isTerminalStatus = (status: TurnStatus): boolean =>
  status === "completed" || status === "failed" || status === "cancelled"

export interface TurnRecord {
  readonly turnId: string
  readonly sessionId: string
  readonly runId: string
  readonly deviceId: string | undefined
  readonly status: TurnStatus
  /** Delivery attempts so far (1 once the first one began). */
  readonly attempt: number
  readonly errorCode: string | undefined
  readonly observationReason: string | undefined
  readonly engineErrorCode: string | undefined
  readonly engineHttpStatus: number | undefined
  readonly usage: unknown
  readonly content: string | undefined
  readonly nativeSessionId: string | undefined
  /** The whole projected outcome once terminal. */
  readonly outcome: TurnOutcome | undefined
  readonly input: MessageInput
  readonly inputCursor: number
  readonly createdAtMs: number
  readonly dispatchedAtMs: number | undefined
  readonly completedAtMs: number | undefined
}

export type JournalKind = "frame" | "fact"

export interface StoredEvent {
  readonly seq: number
  readonly attempt: number
  /** `frame`: a Run frame as received; `fact`: another delivery fact (dispatch, status, receipt). */
  readonly kind: JournalKind
  /** The frame's message type, or the fact's tag. */
  readonly type: string
  /** The encoded wire frame, or the encoded fact. */
  readonly bodyJson: string
  readonly receivedAtMs: number
}

/** `sending`: persisted before the send; the rest are the receipts' facts. */
export type InputStatus = "sending" | "not_sent" | "written" | "accepted" | "rejected" | "unknown"

export interface InputRecord {
  readonly inputId: string
  readonly input: MessageInput
  readonly status: InputStatus
  readonly errorCode: string | undefined
  /** The cursor value this input advanced the Turn to (accepted inputs only). */
  readonly position: number | undefined
  readonly createdAtMs: number
  readonly updatedAtMs: number
}

export type InteractionKind = "permission" | "user_choice" | "function_call"
/** `pending` → `answering` (answer persisted, being delivered) → `answered`; `withdrawn` by permission_cancel; `abandoned` when the Turn ended first. */
export type InteractionStatus = "pending" | "answering" | "answered" | "withdrawn" | "abandoned"
/** The answer's delivery outcome: applied / rejected (definite), unknown (no receipt), not_sent (definite). */
export type AnswerOutcome = "applied" | "rejected" | "unknown" | "not_sent"

export interface InteractionRecord {
  readonly kind: InteractionKind
  readonly interactionId: string
  /** The request payload as received. */
  readonly request: unknown
  readonly status: InteractionStatus
  readonly deliveryId: string | undefined
  readonly answer: unknown
  readonly outcome: AnswerOutcome | undefined
  readonly outcomeErrorCode: string | undefined
  readonly createdAtMs: number
  readonly answeredAtMs: number | undefined
}

const parseJson = (value: unknown): unknown => (value === null || value === undefined ? undefined : JSON.parse(String(value)))

export const readTurn = (row: Record<string, unknown>): TurnRecord => ({
  turnId: String(row.turn_id),
  sessionId: String(row.session_id),
  runId: String(row.run_id),
  deviceId: toStringOrUndefined(row.device_id),
  status: String(row.status) as TurnStatus,
  attempt: toInt(row.attempt),
  errorCode: toStringOrUndefined(row.error_code),
  observationReason: toStringOrUndefined(row.observation_reason),
  engineErrorCode: toStringOrUndefined(row.engine_error_code),
  engineHttpStatus: toIntOrUndefined(row.engine_http_status),
  usage: parseJson(row.usage_json),
  content: toStringOrUndefined(row.content),
  nativeSessionId: toStringOrUndefined(row.native_session_id),
  outcome: parseJson(row.outcome_json) as TurnOutcome | undefined,
  input: JSON.parse(String(row.input_json)) as MessageInput,
  inputCursor: toInt(row.input_cursor),
  createdAtMs: toInt(row.created_at_ms),
  dispatchedAtMs: toIntOrUndefined(row.dispatched_at_ms),
  completedAtMs: toIntOrUndefined(row.completed_at_ms)
})

export const readInput = (row: Record<string, unknown>): InputRecord => ({
  inputId: String(row.input_id),
  input: JSON.parse(String(row.input_json)) as MessageInput,
  status: String(row.status) as InputStatus,
  errorCode: toStringOrUndefined(row.error_code),
  position: toIntOrUndefined(row.position),
  createdAtMs: toInt(row.created_at_ms),
  updatedAtMs: toInt(row.updated_at_ms)
})

export const readInteraction = (row: Record<string, unknown>): InteractionRecord => ({
  kind: String(row.kind) as InteractionKind,
  interactionId: String(row.interaction_id),
  request: parseJson(row.request_json),
  status: String(row.status) as InteractionStatus,
  deliveryId: toStringOrUndefined(row.delivery_id),
  answer: parseJson(row.answer_json),
  outcome: toStringOrUndefined(row.outcome) as AnswerOutcome | undefined,
  outcomeErrorCode: toStringOrUndefined(row.outcome_error_code),
  createdAtMs: toInt(row.created_at_ms),
  answeredAtMs: toIntOrUndefined(row.answered_at_ms)
})
