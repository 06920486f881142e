/**
 * Client-executed functions: `function_call` (Runtime → Core) asks Core to run a declared function;
 * `function_result` (Core → Runtime) answers it, acknowledged by `interaction_decision_ack` under the Run id
 * with the same `delivery_id`. Call ids, delivery ids and input ids are never interchangeable. Replay
 * identity is (Run id, call id) plus the payload fingerprint without `delivery_id`.
 */
import { Schema } from "effect"
import { canonicalJson, omitKeys } from "./Canonical.js"
import { CallId, DeliveryId } from "./Ids.js"
import { InputContent } from "./MessageInput.js"

/** The model called a declared function. */
export const FunctionCallPayload = Schema.Struct({
  call_id: CallId,
  name: Schema.String,
  arguments: Schema.Json
})
export type FunctionCallPayload = typeof FunctionCallPayload.Type

/** Core's result of a function call. `content` is required (may be empty) and ordered. */
export const FunctionResultPayload = Schema.Struct({
  delivery_id: DeliveryId,
  call_id: CallId,
  success: Schema.Boolean,
  content: Schema.Array(InputContent)
})
export type FunctionResultPayload = typeof FunctionResultPayload.Type

/** The replay fingerprint of a function result: its canonical encoding without `delivery_id`. */
export const functionResultFingerprint = (payload: FunctionResultPayload): string =>
  canonicalJson(omitKeys(payload, ["delivery_id"]))
