/**
 * Core's side of client-executed functions (reference part 2 §4): answering a Run's `function_call` with
 * `function_result`, acknowledged by an `interaction_decision_ack` under the Run id with the same delivery id.
 *
 * Identities never interchange: the call id names the native call, the delivery id the resolve attempt
 * (default `function:<call id>`), the Run id the envelope. At most one function_result is outstanding per
 * Run. Content: a string output becomes one `input_text` part, an array output is used as parts, an error
 * string is appended as an `input_text` part (then `success` is false). Images must pass the public inline
 * image profile (`MessageInput.validateInlineImage`) and need `function_result_images` in the admitted
 * declaration (and the engine's qualification); both are checked before anything is sent.
 *
 * What the ack proves: `applied: true` = the Runtime applied the result. No ack within 15 s is
 * `FunctionResultUnknown` (success never inferred, no automatic retry); `applied: false` is the definite
 * `FunctionResultRejected{code}`.
 */
import { Effect, Option, Result, Schema, Semaphore } from "effect"
import { createHash } from "node:crypto"
import { Checks, ErrorCodes, Functions as FunctionsProto, Ids, Limits, MessageInput, Messages } from "../proto/index.js"
import type { Execution } from "../proto/index.js"
import { type Admitted, type EngineProfile, requireFeature } from "./CapabilityPolicy.js"
import type { DeviceSession } from "./DeviceSession.js"
import type { NotSent, SubscriptionRejected } from "./Errors.js"
import { registerAck } from "./Interactions.js"
import {
  type CapabilityUnsupported,
  FunctionResultInvalid,
  FunctionResultOutstanding,
  FunctionResultRejected,
  FunctionResultUnknown
} from "./Outcome.js"

/** What Core's function produced: an output (text or content parts), an error, or both. */
export interface FunctionOutput {
  readonly output?: string | ReadonlyArray<MessageInput.InputContent>
  /** Set when the function failed; appended as a text part and `success` is false. */
  readonly error?: string
}

/** The wire content and success flag of an output. */
export const resultContent = (
  out: FunctionOutput
): { readonly success: boolean; readonly content: ReadonlyArray<MessageInput.InputContent> } => {
  const parts: Array<MessageInput.InputContent> = []
  if (typeof out.output === "string") parts.push({ type: "input_text", text: out.output })
  else if (out.output !== undefined) parts.push(...out.output)
  if (out.error !== undefined) parts.push({ type: "input_text", text: out.error })
  return { success: out.error === undefined, content: parts }
}

/** The default delivery id of a function result. */
/**
 * The default delivery id of a function result: unique per (Run, call) on a connection, because acks are matched by
 * delivery id and native call ids may repeat across Runs. Falls back to a digest when the readable form would
 * exceed the 128-byte id bound.
 */
export const defaultDeliveryId = (runId: Ids.RunId, callId: Ids.CallId): Ids.DeliveryId => {
  const readable = `function:${runId}:${callId}`
  return Ids.unsafeMake.deliveryId(
    Checks.fitsUtf8Bytes(readable, Limits.MaxCorrelationIdBytes)
      ? readable
      : `function:${createHash("sha256").update(`${runId}\u0000${callId}`).digest("hex")}`
  )
}

/** Why Core refuses a `function_call` before running anything. */
export type CallIssue = "undeclared_function"

/** A call must name a function the Run declared; otherwise Core rejects the callback. */
export const validateCall = (
  call: FunctionsProto.FunctionCallPayload,
  tools: ReadonlyArray<Execution.FunctionTool>
): Option.Option<CallIssue> => (tools.some((t) => t.name === call.name) ? Option.none() : Option.some("undeclared_function"))

/** `applied: true`: the Runtime applied the result. */
export interface FunctionResultApplied {
  readonly run_id: Ids.RunId
  readonly call_id: Ids.CallId
  readonly delivery_id: Ids.DeliveryId
}

export type FunctionResultError =
  | FunctionResultInvalid
  | CapabilityUnsupported
  | FunctionResultOutstanding
  | NotSent
  | SubscriptionRejected
  | FunctionResultRejected
  | FunctionResultUnknown

export interface Functions {
  readonly runId: Ids.RunId
  /**
   * Sends the result of one call and waits at most 15 s for its ack. Errors: `FunctionResultInvalid`,
   * `CapabilityUnsupported`, `FunctionResultOutstanding` (another result of this Run is awaiting its ack),
   * `NotSent`, `SubscriptionRejected` — definite, nothing sent; `FunctionResultRejected` — the Runtime's
   * `applied: false`; `FunctionResultUnknown` — sent without a correlated ack.
   */
  readonly answer: (
    callId: Ids.CallId,
    output: FunctionOutput,
    options?: { readonly deliveryId?: Ids.DeliveryId }
  ) => Effect.Effect<FunctionResultApplied, FunctionResultError>
}

export interface FunctionsOptions {
  readonly admitted: Admitted
  readonly engine: EngineProfile
}

const resultCodes: ReadonlySet<string> = new Set(ErrorCodes.FunctionResultErrorCode.literals)
const encodeContent = Schema.decodeUnknownResult(Schema.Array(MessageInput.InputContent), { onExcessProperty: "error" })

/** The per-Run function channel (at most one outstanding result). */
export const make = (session: DeviceSession, runId: Ids.RunId, options: FunctionsOptions): Effect.Effect<Functions> =>
  Effect.map(Semaphore.make(1), (lock) => ({
    runId,
    answer: (callId, output, answerOptions) =>
      Effect.flatMap(
        lock.withPermitsIfAvailable(1)(answerOne(session, runId, callId, output, answerOptions?.deliveryId, options)),
        Option.match({
          onNone: () => Effect.fail(new FunctionResultOutstanding({ run_id: runId, call_id: callId })),
          onSome: Effect.succeed
        })
      ).pipe(Effect.withSpan("Functions.answer"), Effect.annotateLogs({ run_id: runId, call_id: callId }))
  }))

const answerOne = (
  session: DeviceSession,
  runId: Ids.RunId,
  callId: Ids.CallId,
  output: FunctionOutput,
  explicitDelivery: Ids.DeliveryId | undefined,
  options: FunctionsOptions
): Effect.Effect<FunctionResultApplied, FunctionResultError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const deliveryId = explicitDelivery ?? defaultDeliveryId(runId, callId)
      const ids = { run_id: runId, call_id: callId, delivery_id: deliveryId }
      // ---- before dispatch: definite
      const { content, success } = resultContent(output)
      if (Result.isFailure(encodeContent(content))) {
        return yield* new FunctionResultInvalid({ run_id: runId, call_id: callId, issue: "invalid_shape" })
      }
      if (Option.isSome(MessageInput.validateContentParts(content))) {
        return yield* new FunctionResultInvalid({ run_id: runId, call_id: callId, issue: "blank_image_url" })
      }
      const imageIssue = MessageInput.validateInlineImages([{ content }])
      if (Option.isSome(imageIssue)) {
        return yield* new FunctionResultInvalid({ run_id: runId, call_id: callId, issue: imageIssue.value })
      }
      if (MessageInput.contentHasImages(content)) {
        const supported = requireFeature(options.admitted, options.engine, "function_result_images")
        if (Result.isFailure(supported)) return yield* supported.failure
      }
      const message: Messages.MessageOfType<"function_result"> = {
        type: "function_result",
        id: runId,
        payload: { delivery_id: deliveryId, call_id: callId, success, content: [...content] }
      }
      const waiter = yield* registerAck(session, deliveryId, runId)
      yield* session.send(message)
      // ---- after dispatch: a missing ack is unknown
      const ack = yield* Effect.mapError(
        waiter.await(Limits.InteractionAckBudget),
        (missing) => new FunctionResultUnknown({ ...ids, reason: missing.reason })
      )
      if (ack.applied) return ids
      const code = ack.error_code !== undefined && resultCodes.has(ack.error_code)
        ? (ack.error_code as ErrorCodes.FunctionResultErrorCode)
        : "runtime_error"
      return yield* new FunctionResultRejected({ ...ids, code })
    })
  )
