/**
 * Protocol identities as branded strings, so a delivery id, an input id and a call id cannot be swapped by
 * mistake (protocol "Envelope and identity"). Every id is non-blank and at most 128 UTF-8 bytes, except
 * active-input ids (256 bytes). What `Envelope.id` means for each message type is written once, here:
 *
 * | Envelope.id                | message types                                                               |
 * |----------------------------|-----------------------------------------------------------------------------|
 * | PreparationRequestId       | execution_prepare, execution_start, execution_release, preparation_status  |
 * | RunId                      | prompt_request, prompt_cancel, prompt_steer(_ack), function_call/_result,   |
 * |                            | run events, permission_request, prompt_for_user_choice, subagent_*          |
 * | InteractionId              | permission_cancel, permission_decision, prompt_for_user_choice_decision      |
 * | RunId or InteractionId     | interaction_decision_ack (Run id for cancellation and function receipts)    |
 * | TransferId                 | runtime_prepare, runtime_prepare_result                                     |
 * | OperationId                | workspace_read/_write/_export and results, environment_quiesce/resume(d)    |
 * | none                       | heartbeat, device_shutdown                                                  |
 *
 * A trace id is never a request id.
 */
import { Schema } from "effect"
import { isMaxBytes, isNonBlank } from "./Checks.js"
import { MaxCorrelationIdBytes, MaxInputIdBytes } from "./Limits.js"

const bounded = (maxBytes: number) => Schema.String.check(isNonBlank, isMaxBytes(maxBytes))

/** One execution attempt. */
export const RunId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("RunId"))
export type RunId = typeof RunId.Type
/** Envelope.id of prepare, start, release and status; distinct from a Run; not a durable idempotency key. */
export const PreparationRequestId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("PreparationRequestId"))
export type PreparationRequestId = typeof PreparationRequestId.Type
/** Runtime-generated reservation, valid only on the connection that accepted it. */
export const AdmissionHandle = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("AdmissionHandle"))
export type AdmissionHandle = typeof AdmissionHandle.Type
/** Runtime-owned native resource, possibly retained across settled Turns. */
export const ExecutorId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("ExecutorId"))
export type ExecutorId = typeof ExecutorId.Type
/** permission_request.request_id or prompt_for_user_choice.ask_id. */
export const InteractionId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("InteractionId"))
export type InteractionId = typeof InteractionId.Type
/** Identity of one resolve attempt (decision, function result, cancellation receipt). */
export const DeliveryId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("DeliveryId"))
export type DeliveryId = typeof DeliveryId.Type
/** Identity of one active-input batch: its receipt key and conflict key. */
export const InputId = bounded(MaxInputIdBytes).pipe(Schema.brand("InputId"))
export type InputId = typeof InputId.Type
/** Native function-call identity; may repeat across Runs. */
export const CallId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("CallId"))
export type CallId = typeof CallId.Type
/** Connection-local transfer correlation of runtime_prepare. */
export const TransferId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("TransferId"))
export type TransferId = typeof TransferId.Type
/** Correlation id of a workspace operation or suspension request (echoed by its result). */
export const OperationId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("OperationId"))
export type OperationId = typeof OperationId.Type
/** Persisted suspension-attempt fencing id. */
export const SuspensionId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("SuspensionId"))
export type SuspensionId = typeof SuspensionId.Type
/** Core-owned Session identity. */
export const SessionId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type
/** Core-owned Environment identity. */
export const EnvironmentId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("EnvironmentId"))
export type EnvironmentId = typeof EnvironmentId.Type
/** The authenticated device (Runtime) identity. */
export const DeviceId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("DeviceId"))
export type DeviceId = typeof DeviceId.Type
/** The Envelope.id of an interaction_decision_ack: the interaction id for decisions, the Run id otherwise. */
export const AckSubjectId = bounded(MaxCorrelationIdBytes).pipe(Schema.brand("AckSubjectId"))
export type AckSubjectId = typeof AckSubjectId.Type

/** Brands a string the caller already validated (e.g. generated locally). */
export const unsafeMake = {
  runId: (s: string) => s as RunId,
  preparationRequestId: (s: string) => s as PreparationRequestId,
  admissionHandle: (s: string) => s as AdmissionHandle,
  executorId: (s: string) => s as ExecutorId,
  interactionId: (s: string) => s as InteractionId,
  deliveryId: (s: string) => s as DeliveryId,
  inputId: (s: string) => s as InputId,
  callId: (s: string) => s as CallId,
  transferId: (s: string) => s as TransferId,
  operationId: (s: string) => s as OperationId,
  suspensionId: (s: string) => s as SuspensionId,
  sessionId: (s: string) => s as SessionId,
  environmentId: (s: string) => s as EnvironmentId,
  deviceId: (s: string) => s as DeviceId,
  ackSubjectId: (s: string) => s as AckSubjectId
} as const

/**
 * An id as it may appear in a log line: control characters (C0, DEL, C1, U+2028/U+2029) become `\u{..}` escapes
 * and anything past 128 UTF-16 units is cut with "...". Peer and operator ids are never logged raw.
 */
export const printable = (id: string): string => {
  const clipped = id.length > MaxCorrelationIdBytes ? id.slice(0, MaxCorrelationIdBytes) : id
  // eslint-disable-next-line no-control-regex
  const escaped = clipped.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`)
  return id.length > MaxCorrelationIdBytes ? `${escaped}...` : escaped
}
