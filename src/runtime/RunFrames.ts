/**
 * A Run's Turn events as wire frames (protocol "Requests, events and capabilities"): the Run's opt-ins applied as a
 * guard independent of the adapter, delta and thinking numbering, the Run's trace, and an adapter's error payload
 * normalized to what the wire allows. Pure except for the Run's sequence counters.
 */
import { Option, Result } from "effect"
import { type EncodedFrame, encodeFrame } from "../proto/EncodedFrame.js"
import { Messages } from "../proto/index.js"
import { type ErrorPayload, normalizeEngineFailure } from "../proto/RunEvents.js"
import type { TurnEvent } from "./harness/Harness.js"
import type { RunRecord } from "./RunRecord.js"

/** True for the events whose routes `RunHooks.onEmit` registers or drops. */
export const isRouted = (event: TurnEvent): boolean =>
  event.type === "permission_request" || event.type === "permission_cancel" || event.type === "prompt_for_user_choice" ||
  event.type === "function_call"

/**
 * An adapter's error payload as the wire allows it (`RunEvents.normalizeEngineFailure`): an unknown code is
 * dropped, `http_status` survives only with `connection_failed`. A mis-classified failure loses its
 * classification, never the frame.
 */
export const normalizeErrorPayload = (payload: ErrorPayload): ErrorPayload => {
  if (payload.code === undefined && payload.http_status === undefined) return payload
  const failure = normalizeEngineFailure(payload.code, payload.http_status)
  if (Option.isNone(failure)) return { error: payload.error }
  return failure.value.httpStatus === undefined
    ? { error: payload.error, code: failure.value.code }
    : { error: payload.error, code: failure.value.code, http_status: failure.value.httpStatus }
}

/** The text of the `error` frame that replaces a Run event the codec refused (no adapter text, no code). */
export const RefusedEventText = "harness contract violation: a Run event could not be encoded and was not sent"

/** Adds the Run's trace (already validated once) to one of its frames. */
export const traced = <M extends Messages.RuntimeToCore>(run: RunRecord, message: M): M =>
  run.trace === undefined ? message : { ...message, trace: run.trace }

/** A Run event as its wire frame, after opt-ins; `undefined` when the Run's opt-ins drop it. */
export const toMessage = (run: RunRecord, event: TurnEvent): Messages.RuntimeToCore | undefined => {
  const message = untraced(run, event)
  return message === undefined ? undefined : traced(run, message)
}

/**
 * A Run event as its encoded frame, after opt-ins (`undefined` when they drop it): deltas through the Run's
 * direct delta encoder (`EncodedFrame.deltaEncoder`), everything else through the codec. A refusal is the codec's.
 */
export const encodeEvent = (
  run: RunRecord,
  event: TurnEvent
): Result.Result<EncodedFrame, Messages.OutgoingFrameRejected> | undefined => {
  if (event.type === "delta" && run.encodeDelta !== undefined) {
    const frame = encodeDelta(run, event.delta, event.item_id)
    return frame instanceof Messages.OutgoingFrameRejected ? Result.fail(frame) : Result.succeed(frame)
  }
  const message = toMessage(run, event)
  return message === undefined ? undefined : encodeFrame(message)
}

/**
 * A delta as its encoded frame, or the codec's refusal, built from its text and item id (no event object, no
 * `Result`: `TurnSink.deltaUnsafe`). Opt-ins never drop a delta; `item_id` is kept only when the Run observes messages.
 */
export const encodeDelta = (
  run: RunRecord,
  text: string,
  itemId: string | undefined
): EncodedFrame | Messages.OutgoingFrameRejected => {
  if (run.encodeDelta !== undefined) {
    return run.encodeDelta(text, ++run.deltaSequence, run.config.observe_messages === true ? itemId : undefined)
  }
  const codec = encodeFrame(toMessage(run, itemId === undefined ? { type: "delta", delta: text } : { type: "delta", delta: text, item_id: itemId })!)
  return Result.isSuccess(codec) ? codec.success : codec.failure
}

const untraced = (run: RunRecord, event: TurnEvent): Messages.RuntimeToCore | undefined => {
  const id = run.runId
  const observeMessages = run.config.observe_messages === true
  const observeSubagents = run.config.observe_subagent_identities === true
  switch (event.type) {
    case "delta":
      return {
        type: "delta",
        id,
        payload: observeMessages && event.item_id !== undefined
          ? { item_id: event.item_id, delta: event.delta, sequence: ++run.deltaSequence }
          : { delta: event.delta, sequence: ++run.deltaSequence }
      }
    case "thinking":
      return { type: "thinking", id, payload: { text: event.text, sequence: ++run.thinkingSequence } }
    case "output_message":
      return observeMessages ? { type: "output_message", id, payload: event.payload } : undefined
    case "tool_call": {
      if (run.config.observe_tool_observations === true || event.payload.observation === undefined) {
        return { type: "tool_call", id, payload: event.payload }
      }
      const { observation: _dropped, ...payload } = event.payload
      return { type: "tool_call", id, payload }
    }
    case "usage":
      return { type: "usage", id, payload: event.payload }
    case "error":
      return { type: "error", id, payload: normalizeErrorPayload(event.payload) }
    case "permission_request":
      return { type: "permission_request", id, payload: event.payload }
    case "permission_cancel":
      return { type: "permission_cancel", id: event.interactionId }
    case "prompt_for_user_choice":
      return { type: "prompt_for_user_choice", id, payload: event.payload }
    case "function_call":
      return { type: "function_call", id, payload: event.payload }
    // Sub-agent frames only for a Run that opted in, whatever the adapter emits.
    case "subagent_identity":
      return observeSubagents ? { type: "subagent_identity", id, payload: event.payload } : undefined
    case "subagent_lifecycle":
      return observeSubagents ? { type: "subagent_lifecycle", id, payload: event.payload } : undefined
    case "subagent_turn":
      return observeSubagents ? { type: "subagent_turn", id, payload: event.payload } : undefined
    case "subagent_item":
      return observeSubagents ? { type: "subagent_item", id, payload: event.payload } : undefined
    case "subagent_coordination":
      return observeSubagents ? { type: "subagent_coordination", id, payload: event.payload } : undefined
  }
}

