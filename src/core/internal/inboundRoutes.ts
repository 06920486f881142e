/**
 * The inbound routing table of a device session (the header of `DeviceSession.ts` states the rules): Run
 * frames to the subscriber of their Run, preparation statuses to their request's subscription, reply
 * families to the one Correlator. Each handler returns the log line or yield it needs, or nothing; only a Run
 * frame whose subscriber is full waits (backpressure, bounded by the stall timeout; see Subscriptions.ts). The heartbeat handler
 * stays with SessionInbound (it keeps the declaration snapshot).
 */
import { Effect } from "effect"
import type { Messages } from "../../proto/index.js"
import { type ReplyFamilies, type ReplyFamily, type ReplyKeyedById, steerAckKey } from "../ReplyFamilies.js"
import type { RunEvent } from "../RunEvent.js"
import type { SessionRoutes } from "../SessionServices.js"
import type { RouteResult } from "../Subscriptions.js"

/** One handler per inbound message type (exhaustive). */
export type Handlers = {
  readonly [K in Messages.RuntimeToCoreType]: (
    message: Messages.MessageOfType<K>,
    bytes: number
  ) => Effect.Effect<void> | undefined
}

/** Every handler but the heartbeat's. */
export const routeHandlers = (routes: SessionRoutes["Service"]): Omit<Handlers, "heartbeat"> => {
  const { preparations, replies, runs, subscriberStallTimeout } = routes
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

  const routeRun = (message: RunEvent, bytes: number) => {
    const result = runs.route(message)
    if (result !== "full") return afterRoute(message, bytes, result)
    // Backpressure: the Run's buffer is full. The read loop waits here, so nothing more is read from the
    // socket until its consumer takes a frame (or is found gone after the stall timeout).
    return Effect.flatMap(
      runs.routeWaiting(message, subscriberStallTimeout),
      (routed) => afterRoute(message, bytes, routed) ?? Effect.void
    )
  }

  const routeReply = <F extends ReplyFamily>(family: F, key: string, message: ReplyFamilies[F], bytes: number) =>
    replies.deliver(family, key, message)
      ? undefined
      : dropped("reply without waiter dropped", family, message.id, bytes)

  const routeById = <F extends ReplyKeyedById>(message: ReplyFamilies[F], bytes: number) =>
    routeReply(message.type as F, message.id, message, bytes)

  return {
    preparation_status: (message, bytes) => {
      const result = preparations.route(message.id, message.payload)
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
    interaction_decision_ack: (message, bytes) =>
      routeReply("interaction_decision_ack", message.payload.delivery_id, message, bytes),
    prompt_steer_ack: (message, bytes) =>
      message.payload.input_id === ""
        ? dropped("steer receipt without input_id establishes nothing", message.type, message.id, bytes)
        : routeReply("prompt_steer_ack", steerAckKey(message.id, message.payload.input_id), message, bytes),
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
}
