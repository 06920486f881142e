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
 * This file declares the contract; the implementation (`make`) follows it below the types. The session's parts
 * are `Context.Service`s (SessionServices.ts, SessionInbound.ts, SessionOutbound.ts) provided by one
 * `SessionLayer`, built fresh inside the connection's scope (see docs/architecture.md, "Core session"). Routing
 * of inbound frames: Run-scoped types to the subscriber of their Run (permission_cancel through the interaction → Run
 * map), preparation_status to its request's subscription, reply families to the one Correlator, heartbeats to
 * the declaration snapshot. The read loop does no work beyond decode + route; it waits only for room in a full
 * Run subscriber (backpressure: nothing more is read from the socket meanwhile, and the liveness deadline
 * does not run), at most `subscriberStallTimeout` without progress (Subscriptions.ts).
 */
import { type Cause, Effect, Layer, type Option, type Scope, type Stream } from "effect"
import type { Messages, Ids } from "../proto/index.js"
import type { NotSent, ObservationLost, SubscriberOverflow, SubscriptionRejected } from "./Errors.js"
import type { ReplyFamilies, ReplyFamily } from "./ReplyFamilies.js"
import type { RunEvent } from "./RunEvent.js"
import { SessionInbound } from "./SessionInbound.js"
import { SessionOutbound } from "./SessionOutbound.js"
import {
  type Declaration,
  SessionDeclaration,
  SessionEnd,
  SessionInfo,
  SessionLiveness,
  type SessionOptions,
  SessionRoutes,
  SessionTap
} from "./SessionServices.js"
import { TransportEnded } from "./transport/DeviceTransport.js"

export type { Declaration, SessionOptions } from "./SessionServices.js"

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
   * nothing will be sent) when the queue is full or closed, or the message is invalid or over 4 MiB.
   */
  readonly send: (message: Messages.CoreToRuntime) => Effect.Effect<void, NotSent>
  /** The latest valid declaration; `None` before the first heartbeat (capabilities unknown, nothing admitted). */
  readonly declaration: Effect.Effect<Option.Option<Declaration>>
  /**
   * The only Run subscription entry point. Register before sending the request that can produce the Run's
   * frames. The stream ends successfully after `done`, or fails with `ObservationLost` (disconnection,
   * replacement) or `SubscriberOverflow`; it never fabricates an error or a done. Closing the scope
   * unsubscribes (observer cancellation settles nothing).
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
 * The parts of one session, in build order (and so reverse teardown order): the connection's inputs, then its
 * routes, declaration and tap, then its end (which closes the routes), the liveness deadline, and the read and
 * send sides. Built fresh per connection by `make`, inside the connection's scope.
 */
export const SessionLayer = (options: SessionOptions) =>
  Layer.mergeAll(SessionInbound.layer, SessionOutbound.layer).pipe(
    Layer.provideMerge(SessionLiveness.layer),
    Layer.provideMerge(SessionEnd.layer),
    Layer.provideMerge(Layer.mergeAll(SessionRoutes.layer, SessionDeclaration.layer, SessionTap.layer)),
    Layer.provideMerge(SessionInfo.layer(options))
  )

/** A built session and the effect that runs its connection. */
export interface SessionRunner {
  readonly session: DeviceSession
  /**
   * Reads and routes frames until the connection ends, then closes the transport. Returns the reason only
   * after every observer of this connection has ended with it. Interrupting it ends the connection with
   * `interruptedReason()`.
   */
  readonly run: Effect.Effect<ObservationLost>
}

/**
 * Builds the session of one authenticated connection in the caller's scope (the connection's scope: closing it
 * stops the frame tap's fiber). Nothing is read until `run` starts; `send` and the subscription entry points
 * work at once (subscribe before sending).
 */
export const make = (options: SessionOptions): Effect.Effect<SessionRunner, never, Scope.Scope> =>
  Effect.gen(function*() {
    const services = yield* Layer.buildWithScope(SessionLayer(options), yield* Effect.scope)
    return yield* Effect.gen(function*() {
      const { connectionNumber, deviceId, transport } = yield* SessionInfo
      const { preparations, replies, runs } = yield* SessionRoutes
      const declaration = yield* SessionDeclaration
      const end = yield* SessionEnd
      const liveness = yield* SessionLiveness
      const inbound = yield* SessionInbound
      const outbound = yield* SessionOutbound

      const run: Effect.Effect<ObservationLost> = Effect.gen(function*() {
        yield* inbound.readLoop.pipe(
          Effect.catchCause((cause) =>
            Effect.suspend(() =>
              end.terminate("disconnected")
                ? Effect.logInfo("connection ended").pipe(Effect.annotateLogs({ cause: describeEnd(cause) }))
                : Effect.void
            )
          ),
          Effect.forkScoped
        )
        yield* transport.ended.pipe(
          Effect.flatMap(() => Effect.sync(() => end.terminate("disconnected"))),
          Effect.forkScoped
        )
        yield* liveness.watch
        return yield* end.closed
      }).pipe(
        Effect.scoped,
        Effect.ensuring(
          Effect.suspend(() => {
            end.terminate(options.interruptedReason())
            const ended = end.ended()!
            return transport.close(ended.code, ended.lost.reason)
          })
        ),
        Effect.annotateLogs({ device_id: deviceId, connection: connectionNumber })
      )

      const session: DeviceSession = {
        deviceId,
        connectionNumber,
        send: outbound.send,
        declaration: declaration.get,
        subscribeDurable: (runId) => runs.subscribe(runId),
        subscribePreparation: (requestId) => preparations.subscribe(requestId),
        expectReplies: (family, key) => replies.register(family, key),
        closed: end.closed,
        close: (code, reason) => Effect.sync(() => void end.terminate(reason, code))
      }
      return { session, run }
    }).pipe(Effect.provideContext(services))
  })

const describeEnd = (cause: Cause.Cause<unknown>): string => {
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail" && reason.error instanceof TransportEnded) {
      return reason.error.code === undefined ? reason.error.reason : `${reason.error.reason} ${reason.error.code}`
    }
    if (reason._tag === "Interrupt") return "interrupted"
  }
  return "defect"
}
