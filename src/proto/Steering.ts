/**
 * Active input (protocol "Active input receipts"): `prompt_steer` carries one input batch for an active Run
 * (Envelope.id = Run id); `prompt_steer_ack` reports its phases. `written` proves only that the native
 * write finished (consumption unconfirmed); `accepted` proves the adapter confirmed native consumption.
 * Neither `written` nor a send failure advances Core's input cursor; `accepted` does.
 */
import { Schema } from "effect"
import { canonicalJson } from "./Canonical.js"
import { SteerErrorCode } from "./ErrorCodes.js"
import { InputId } from "./Ids.js"
import { MessageInput } from "./MessageInput.js"

/** One active-input batch. Core always sets `durable_receipt: true`. */
export const PromptSteerPayload = Schema.Struct({
  input_id: InputId,
  input: MessageInput,
  durable_receipt: Schema.optionalKey(Schema.Boolean)
})
export type PromptSteerPayload = typeof PromptSteerPayload.Type

/**
 * A steer receipt. `input_id` is empty only when the request could not be decoded. `written` appears only
 * with `accepted: false` and no error code.
 */
export const PromptSteerAckPayload = Schema.Struct({
  input_id: Schema.String,
  accepted: Schema.Boolean,
  written: Schema.optionalKey(Schema.Boolean),
  error_code: Schema.optionalKey(SteerErrorCode),
  error: Schema.optionalKey(Schema.String)
}).check(
  Schema.makeFilter(
    (ack) =>
      !(ack.accepted && ack.error_code !== undefined) &&
      !(ack.written === true && (ack.accepted || ack.error_code !== undefined)),
    { expected: "a consistent steer receipt phase" }
  )
)
export type PromptSteerAckPayload = typeof PromptSteerAckPayload.Type

/** The phase a receipt reports. */
export type SteerPhase =
  | { readonly _tag: "Written" }
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Error"; readonly code: SteerErrorCode }
  | { readonly _tag: "Pending" } // accepted false, not written, no code: proves nothing

export const steerPhase = (ack: PromptSteerAckPayload): SteerPhase =>
  ack.accepted
    ? { _tag: "Accepted" }
    : ack.error_code !== undefined
    ? { _tag: "Error", code: ack.error_code }
    : ack.written === true
    ? { _tag: "Written" }
    : { _tag: "Pending" }

/** Whether a phase ends the input (no further receipt follows for it). */
export const isTerminalSteerPhase = (phase: SteerPhase): boolean =>
  phase._tag === "Accepted" ||
  (phase._tag === "Error" && phase.code !== "not_ready" && phase.code !== "busy" && phase.code !== "in_flight")

/**
 * The conflict fingerprint of a steer: canonical encoding of the input plus the durable flag. The same
 * input id with another fingerprint is `input_conflict`.
 */
export const steerFingerprint = (payload: PromptSteerPayload): string =>
  canonicalJson({ input: payload.input, durable_receipt: payload.durable_receipt === true })
