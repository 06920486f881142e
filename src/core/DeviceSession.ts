/**
 * One authenticated Runtime connection as Core's callers see it (protocol "Ownership and connection",
 * "Failures, retries and cleanup"). The gateway builds one per physical connection; a newer connection for
 * the same device replaces it, and the old session's observers end with `ObservationLost("replaced")`.
 *
 * Malformed-frame policy for this direction (Runtime → Core), per message family (docs/wire-decisions.md G14).
 * Every invalid frame counts against the connection's invalid-frame budget (G13: the first 8 per 60 s logged
 * one line each with code, type, id and size — never the payload —, the rest summarized; the 65th closes
 * with 1008 `invalid_frame`). On top of that:
 *
 * | family                                                          | a malformed frame …                                  |
 * |-----------------------------------------------------------------|------------------------------------------------------|
 * | heartbeat                                                       | clears the declaration, closes 1008 (`invalid_heartbeat`) |
 * | delta, thinking, output_message, tool_call, error, done,        | fails its Run's observer with `invalid_run_frame`:   |
 * | permission_request, prompt_for_user_choice, function_call       | the Turn ends `event_stream_incomplete` (the frame   |
 * |                                                                 | proves delivery, whatever the preparation stream saw) |
 * | usage, subagent_*, permission_cancel                            | is dropped (a later frame supersedes it, metadata,   |
 * |                                                                 | or enforced natively); the Turn goes on              |
 * | preparation_status                                              | fails its request's subscription (`invalid_frame`)   |
 * | correlated replies (*_result, environment_*, prompt_steer_ack,  | fails the waiter it names (`invalid_frame`): that    |
 * | interaction_decision_ack when matched)                          | operation's outcome is unknown                       |
 * | anything without a usable type and id                           | is dropped                                           |
 *
 * This file declares the contract; the implementation (`start`) follows it below the types. The session is ONE
 * plain record (`SessionState`, SessionServices.ts) built fresh per connection, and the gateway-wide functions
 * of SessionInbound.ts and SessionOutbound.ts take it as their argument (issue 18: no per-connection layer,
 * MemoMap or Context; see docs/architecture.md, "Core session"). Routing
 * of inbound frames: Run-scoped types to the subscriber of their Run (permission_cancel through the interaction → Run
 * map), preparation_status to its request's subscription, reply families to the one Correlator, heartbeats to
 * the declaration snapshot. The read side does no work beyond decode + route; it waits only for room in a full
 * Run subscriber (backpressure: nothing more is read from the socket meanwhile, and the liveness deadline
 * does not run), at most `subscriberStallTimeout` without progress (Subscriptions.ts).
 */
import { Clock, Context, Effect, type Fiber, type Option, Queue, References, type Scope, type Stream } from "effect"
import type { Messages, Ids } from "../proto/index.js"
import type { NotSent, ObservationLost, SubscriberOverflow, SubscriptionRejected } from "./Errors.js"
import type { TappedFrame } from "./FrameTap.js"
import type { ReplyFamilies, ReplyFamily } from "./ReplyFamilies.js"
import type { RunEvent } from "./RunEvent.js"
import * as SessionInbound from "./SessionInbound.js"
import * as SessionOutbound from "./SessionOutbound.js"
import type { EncodedCoreFrame } from "./SessionOutbound.js"
import { type Declaration, type SessionOptions, SessionState } from "./SessionServices.js"

export type { Declaration, SessionOptions } from "./SessionServices.js"

/** The transport a session runs over (its contract sits below the session, in src/core/transport). */
export type { DeviceTransport } from "./transport/DeviceTransport.js"

/** A frame routed to a Run's subscriber (defined in RunEvent.ts, re-exported here as part of the contract). */
export type { RunEvent } from "./RunEvent.js"

export { type ReplyFamilies, type ReplyFamily, steerAckKey } from "./ReplyFamilies.js"

export interface DeviceSession {
  readonly deviceId: Ids.DeviceId
  /** Gateway-wide, monotonically increasing number of this physical connection. */
  readonly connectionNumber: number
  /**
   * Puts one envelope in this connection's bounded send queue. Success proves only that the envelope entered
   * the local queue: not that it was written, received, accepted or applied. Fails with `NotSent` (definite:
   * nothing will be sent) when the queue is full or closed, or the message is invalid or over 4 MiB. Takes a
   * message, or a frame encoded earlier with its message (`EncodedFrame.encodeChunkFrame`: a chunk whose base64
   * text is not re-escaped), which is queued as it is, with the trace it was encoded with.
   */
  readonly send: (message: Messages.CoreToRuntime | EncodedCoreFrame) => Effect.Effect<void, NotSent>
  /** The latest valid declaration; `None` before the first heartbeat (capabilities unknown, nothing admitted). */
  readonly declaration: Effect.Effect<Option.Option<Declaration>>
  /**
   * The only Run subscription entry point. Register before sending the request that can produce the Run's
   * frames. The stream ends successfully after `done`, or fails with `ObservationLost` (disconnection,
   * replacement) or `SubscriberOverflow`; it never fabricates an error or a done. Closing the scope
   * unsubscribes (observer cancellation settles nothing). Each of the stream's chunks is everything routed to
   * the Run since its consumer last took (a socket read's events, hundreds of deltas in a burst), so a consumer
   * that takes them as arrays (`Stream.runForEachArray`) runs one Effect per read instead of one per event.
   */
  readonly subscribeDurable: (
    runId: Ids.RunId
  ) => Effect.Effect<Stream.Stream<RunEvent, ObservationLost | SubscriberOverflow>, SubscriptionRejected, Scope.Scope>
  /**
   * Preparation statuses of one request id, with the per-handle revision rule applied (older, repeated and
   * foreign-handle statuses dropped; `rejected` passes through). Ends after a terminal state (started,
   * released, expired, failed); fails with `ObservationLost` or `SubscriberOverflow` (16 buffered).
   */
  readonly subscribePreparation: (
    requestId: Ids.PreparationRequestId
  ) => Effect.Effect<
    Stream.Stream<Messages.MessageOfType<"preparation_status">["payload"], ObservationLost | SubscriberOverflow>,
    SubscriptionRejected,
    Scope.Scope
  >
  /**
   * Registers for the replies of one correlated family and key before sending. A duplicate pending key is
   * rejected (no transport-wide deduplication). The stream fails with `ObservationLost` when the connection
   * ends; a reply without the required correlation never reaches it.
   */
  readonly expectReplies: <F extends ReplyFamily>(
    family: F,
    key: string
  ) => Effect.Effect<Stream.Stream<ReplyFamilies[F], ObservationLost | SubscriberOverflow>, SubscriptionRejected, Scope.Scope>
  /** Completes with the reason when this connection ends (it settles no execution). */
  readonly closed: Effect.Effect<ObservationLost>
  /** Closes the transport with a close code. Settles no execution and sends no synthetic events. */
  readonly close: (code: number, reason: ObservationLost["reason"]) => Effect.Effect<void>
}

// ============================================================================================== implementation

/**
 * The session callers get: a plain record of the `DeviceSession` operations over the connection's state (a
 * record, so callers may copy or spread it like any value of the contract).
 */
const sessionOf = (state: SessionState): DeviceSession => ({
  deviceId: state.options.deviceId,
  connectionNumber: state.options.connectionNumber,
  send: (message) => SessionOutbound.send(state, message),
  declaration: Effect.sync(() => state.declared),
  subscribeDurable: (runId) => state.runs.subscribe(runId),
  subscribePreparation: (requestId) => state.preparations.subscribe(requestId),
  expectReplies: (family, key) => state.replies.register(family, key),
  closed: state.closed,
  close: (code, reason) => Effect.sync(() => void state.terminate(reason, code))
})

/** A built session, and `begin`: start reading and watching liveness (once; nothing is read before). */
export interface StartedSession {
  readonly session: DeviceSession
  readonly begin: () => void
}

/**
 * Builds the session of one authenticated connection. Once `begin` is called it reads (transport callbacks, no
 * fiber of its own while idle; issue 18), watched by the gateway's liveness wheel. When the connection ends (any reason:
 * `close`, the peer, liveness, an invalid heartbeat), one fiber closes the transport with the end's code and then
 * runs `onEnded` with the reason every observer got. `send` and the subscription entry points work at once.
 * Read-side work and the end run in the caller's context, annotated with the device and connection.
 */
export const start = (
  options: SessionOptions,
  onEnded: (lost: ObservationLost) => Effect.Effect<void>
): Effect.Effect<StartedSession> =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    // Read-side work and the end run in the gateway's context with the caller's loggers, minimum level and log
    // annotations (e.g. the route's connection id) plus the device and connection: the caller's whole context is
    // not kept for the connection's lifetime (a map of ~60 services apiece; issue 18).
    const caller = yield* Effect.context<never>()
    const context = options.metricContext ?? caller
    const state = new SessionState(options, clock, context)
    const loggers = Context.get(caller, References.CurrentLoggers)
    const minimumLevel = Context.get(caller, References.MinimumLogLevel)
    const annotations = {
      ...Context.get(caller, References.CurrentLogAnnotations),
      device_id: options.deviceId,
      connection: options.connectionNumber
    }
    const runFork = Effect.runForkWith(context)
    const fork = (effect: Effect.Effect<void>) =>
      runFork(effect.pipe(
        Effect.provideService(References.CurrentLogAnnotations, annotations),
        Effect.provideService(References.MinimumLogLevel, minimumLevel),
        Effect.provideService(References.CurrentLoggers, loggers)
      ))
    let tapFiber: Fiber.Fiber<void> | undefined
    if (options.tap.enabled) {
      const queue = yield* Queue.dropping<TappedFrame>(options.config.tapBuffer)
      const tap = options.tap
      tapFiber = fork(
        Queue.take(queue).pipe(
          Effect.flatMap((frame) => tap.onFrame(frame)),
          Effect.catchCause((cause) => Effect.logWarning("frame tap failed", cause)),
          Effect.forever
        )
      )
      state.tapQueue = queue
    }
    let unwatch: (() => void) | undefined
    state.onTerminated = () => {
      unwatch?.()
      state.holdFiber?.interruptUnsafe()
      tapFiber?.interruptUnsafe()
      const ended = state.ended!
      fork(Effect.andThen(options.transport.close(ended.code, ended.lost.reason), onEnded(ended.lost)))
    }
    const begin = () => {
      if (state.ended !== undefined || state.fork !== undefined) return
      // The deadline counts from the connection's acceptance (the state's creation), not from here.
      unwatch = options.liveness.add(state)
      // Reads are transport callbacks routed synchronously; only work the read side must wait for runs on a fiber.
      SessionInbound.listen(state, fork)
    }
    return { session: sessionOf(state), begin }
  })
