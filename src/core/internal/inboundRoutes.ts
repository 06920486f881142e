/**
 * The inbound routing table of a device session (the header of `DeviceSession.ts` states the rules): Run
 * frames to the subscriber of their Run, preparation statuses to their request's subscription, reply
 * families to the one Correlator. Each handler returns the log line or yield it needs, or nothing; only a Run
 * frame whose subscriber is full waits (backpressure, bounded by the stall timeout; see Subscriptions.ts). The heartbeat handler
 * stays with SessionInbound (it keeps the declaration snapshot). The table is one module-level object shared by
 * every connection: each handler takes the connection's state (issue 18: no table of closures per connection).
 */
import { Effect } from "effect"
import type { Messages } from "../../proto/index.js"
import { type ReplyFamilies, type ReplyFamily, type ReplyKeyedById, steerAckKey } from "../ReplyFamilies.js"
import type { RunEvent } from "../RunEvent.js"
import type { SessionState } from "../SessionServices.js"
import type { RouteResult } from "../Subscriptions.js"

/** One handler per inbound message type (exhaustive). */
export type Handlers = {
  readonly [K in Messages.RuntimeToCoreType]: (
    state: SessionState,
    message: Messages.MessageOfType<K>,
    bytes: number
  ) => Effect.Effect<void> | undefined
}

const dropped = (what: string, type: string, id: string, bytes: number) =>
  Effect.logDebug(what).pipe(Effect.annotateLogs({ type, id, bytes }))

const overflowed = (message: RunEvent, bytes: number) =>
  Effect.logWarning("run subscriber took nothing within the stall timeout; its stream failed").pipe(
    Effect.annotateLogs({ type: message.type, id: message.id, bytes })
  )

const afterRoute = (message: RunEvent, bytes: number, result: RouteResult): Effect.Effect<void> | undefined => {
  switch (result) {
    case "delivered":
      return undefined
    // The subscriber is falling behind: give it a turn before routing the next frame.
    case "delivered_backlogged":
      return Effect.yieldNow
    case "overflow":
      return overflowed(message, bytes)
    case "no_subscriber":
    case "stale":
      return dropped("run frame without subscriber dropped", message.type, message.id, bytes)
  }
}

const routeRun = (state: SessionState, message: RunEvent, bytes: number) => {
  const result = state.runs.route(message)
  if (result !== "full") return afterRoute(message, bytes, result)
  // Backpressure: the Run's buffer is full. The read side waits here, so nothing more is read from the
  // socket until its consumer takes a frame (or is found gone after the stall timeout).
  return Effect.flatMap(
    state.runs.routeWaiting(message, state.options.config.subscriberStallTimeout),
    (routed) => afterRoute(message, bytes, routed) ?? Effect.void
  )
}

const routeReply = <F extends ReplyFamily>(
  state: SessionState,
  family: F,
  key: string,
  message: ReplyFamilies[F],
  bytes: number
) =>
  state.replies.deliver(family, key, message)
    ? undefined
    : dropped("reply without waiter dropped", family, message.id, bytes)

const routeById = <F extends ReplyKeyedById>(state: SessionState, message: ReplyFamilies[F], bytes: number) =>
  routeReply(state, message.type as F, message.id, message, bytes)

/** Every handler but the heartbeat's. */
export const routeHandlers: Omit<Handlers, "heartbeat"> = {
  preparation_status: (state, message, bytes) => {
    const result = state.preparations.route(message.id, message.payload)
    switch (result) {
      case "delivered":
      case "delivered_backlogged":
        return undefined
      case "invalid":
        return Effect.logWarning("preparation status with a wrong shape for its state; subscription failed").pipe(
          Effect.annotateLogs({ type: message.type, id: message.id, state: message.payload.state, bytes })
        )
      case "overflow":
        return Effect.logWarning("preparation subscriber overflowed; its stream failed").pipe(
          Effect.annotateLogs({ type: message.type, id: message.id, bytes })
        )
      case "stale":
        return dropped("stale, repeated or foreign-handle preparation status ignored", message.type, message.id, bytes)
      case "no_subscriber":
        return dropped("preparation status without subscriber dropped", message.type, message.id, bytes)
    }
  },
  interaction_decision_ack: (state, message, bytes) =>
    routeReply(state, "interaction_decision_ack", message.payload.delivery_id, message, bytes),
  prompt_steer_ack: (state, message, bytes) =>
    message.payload.input_id === ""
      ? dropped("steer receipt without input_id establishes nothing", message.type, message.id, bytes)
      : routeReply(state, "prompt_steer_ack", steerAckKey(message.id, message.payload.input_id), message, bytes),
  runtime_prepare_result: routeById,
  workspace_read_result: routeById,
  workspace_write_result: routeById,
  workspace_export_result: routeById,
  environment_quiesced: routeById,
  environment_resumed: routeById,
  delta: routeRun,
  thinking: routeRun,
  output_message: routeRun,
  tool_call: routeRun,
  usage: routeRun,
  error: routeRun,
  done: routeRun,
  permission_request: routeRun,
  permission_cancel: routeRun,
  prompt_for_user_choice: routeRun,
  function_call: routeRun,
  subagent_identity: routeRun,
  subagent_lifecycle: routeRun,
  subagent_turn: routeRun,
  subagent_item: routeRun,
  subagent_coordination: routeRun
}
