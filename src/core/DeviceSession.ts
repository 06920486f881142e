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
 * This file declares the contract; the implementation (`make`) follows it below the types. Routing of inbound
 * frames: Run-scoped types to the subscriber of their Run (permission_cancel through the interaction → Run
 * map), preparation_status to its request's subscription, reply families to the one Correlator, heartbeats to
 * the declaration snapshot. The read loop does no work beyond decode + route; it waits only for room in a full
 * Run subscriber (backpressure: nothing more is read from the socket meanwhile, and the liveness deadline
 * does not run), at most `subscriberStallTimeout` without progress (Subscriptions.ts).
 */
import { type Cause, Clock, Deferred, Duration, Effect, Exit, Option, Queue, Result, type Scope, type Stream } from "effect"
import { logVerdict, makeInvalidFrameBudget } from "./transport/internal/invalidFrames.js"
import { Envelope, Limits, Messages, Trace, type Capabilities, type Ids } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import * as Correlator from "./Correlator.js"
import { NotSent, ObservationLost, type ObservationLostReason, type SubscriberOverflow, type SubscriptionRejected } from "./Errors.js"
import type { FrameTapShape, TappedFrame } from "./FrameTap.js"
import type { GatewayConfigShape } from "./GatewayConfig.js"
import { type Handlers, routeHandlers } from "./internal/inboundRoutes.js"
import type { ReplyFamilies, ReplyFamily } from "./ReplyFamilies.js"
import { failNamedObserver } from "./internal/malformedFrames.js"
import type { RunEvent } from "./RunEvent.js"
import { makePreparationRoutes, makeRunRoutes } from "./Subscriptions.js"
import { closeCodeFor, type DeviceTransport, TransportEnded } from "./transport/DeviceTransport.js"

/** The latest valid declaration of a connection. Kinds missing from it are not advertised. */
export interface Declaration {
  readonly kinds: ReadonlyMap<string, Capabilities.AgentKindDescriptor>
  readonly daemonVersion: string | undefined
  readonly activeRequests: number
  /** The heartbeat's own `ts` (sender clock, Unix seconds). */
  readonly ts: number
  /** Core's clock (Unix ms) when the heartbeat arrived. */
  readonly receivedAtMs: number
}

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

// ---------------------------------------------------------------------------------------------- make

export interface SessionOptions {
  readonly deviceId: Ids.DeviceId
  readonly connectionNumber: number
  readonly transport: DeviceTransport
  readonly config: GatewayConfigShape
  readonly tap: FrameTapShape
  /** Called on the read loop for every valid heartbeat; must not block (e.g. publish to an unbounded PubSub). */
  readonly onDeclared: (declaration: Declaration) => void
  /** The reason recorded when the connection fiber is interrupted from outside (server or gateway shutdown). */
  readonly interruptedReason: () => ObservationLostReason
}

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
 * Builds the session of one authenticated connection. Nothing is read until `run` starts; `send` and the
 * subscription entry points work at once (subscribe before sending).
 */
export const make = (options: SessionOptions): Effect.Effect<SessionRunner> =>
  Effect.gen(function*() {
    const { config, connectionNumber, deviceId, tap, transport } = options
    const runs = makeRunRoutes({
      buffer: config.runSubscriptionBuffer,
      maxSubscriptions: config.maxRunSubscriptions,
      maxInteractionRoutes: config.maxInteractionRoutes
    })
    const preparations = makePreparationRoutes({
      buffer: Limits.PreparationSubscriptionBuffer,
      maxSubscriptions: Limits.MaxPreparationSubscriptions
    })
    const replies = Correlator.make<ReplyFamilies>({ capacity: config.maxReplyWaiters, buffer: config.replyBuffer })
    const closeSignal = yield* Deferred.make<ObservationLost>()
    const tapQueue = tap.enabled ? yield* Queue.dropping<TappedFrame>(config.tapBuffer) : undefined
    const clock = yield* Clock.Clock
    const invalidFrameBudget = makeInvalidFrameBudget()
    const metricContext = yield* Effect.context<never>()

    let declaration: Option.Option<Declaration> = Option.none()
    // Liveness counts from the moment the connection was accepted, not from when reading starts.
    let lastInbound = clock.currentTimeMillisUnsafe()
    // True while the read loop waits for room in a full Run subscriber: nothing is read then, so the
    // liveness deadline does not run (it restarts once reading resumes).
    let holding = false
    let ended: { readonly lost: ObservationLost; readonly code: number } | undefined

    /** Ends observation of everything on this connection, synchronously and once. */
    const terminate = (reason: ObservationLostReason, code = closeCodeFor(reason)): boolean => {
      if (ended !== undefined) return false
      const lost = new ObservationLost({ reason })
      ended = { lost, code }
      declaration = Option.none()
      runs.close(lost)
      preparations.close(lost)
      replies.close(lost)
      Deferred.doneUnsafe(closeSignal, Exit.succeed(lost))
      return true
    }

    const tapFrame = (frame: Omit<TappedFrame, "deviceId" | "connectionNumber" | "at">) => {
      if (tapQueue !== undefined) {
        Queue.offerUnsafe(tapQueue, { ...frame, deviceId, connectionNumber, at: clock.currentTimeMillisUnsafe() })
      }
    }

    // ------------------------------------------------------------------------------------------ send

    // A request without a trace carries the caller's current span, so the Runtime's handler joins it.
    const withCallerTrace = (message: Messages.CoreToRuntime): Effect.Effect<Messages.CoreToRuntime> =>
      message.trace !== undefined
        ? Effect.succeed(message)
        : Effect.map(Trace.currentTraceparent, (trace) => (trace === undefined ? message : { ...message, trace }))

    const send = (message: Messages.CoreToRuntime): Effect.Effect<void, NotSent> =>
      Effect.flatMap(withCallerTrace(message), (message) => Effect.suspend(() => {
        if (ended !== undefined) return Effect.fail(new NotSent({ type: message.type, reason: "connection_closed" }))
        const encoded = Messages.encodeMessage(message)
        if (Result.isFailure(encoded)) {
          return Effect.fail(new NotSent({ type: message.type, reason: encoded.failure.reason }))
        }
        const offered = transport.offer(encoded.success)
        if (offered === "queued") CoreMetrics.frameUnsafe(metricContext, "out", Buffer.byteLength(encoded.success, "utf8"))
        if (offered !== "queued") {
          return Effect.fail(
            new NotSent({ type: message.type, reason: offered === "full" ? "queue_full" : "connection_closed" })
          )
        }
        if (tapQueue !== undefined) {
          const id = "id" in message ? message.id : undefined
          tapFrame({
            direction: "core→runtime",
            type: message.type,
            ...(id === undefined ? {} : { id }),
            bytes: Buffer.byteLength(encoded.success, "utf8"),
            message
          })
        }
        return Effect.void
      }))

    // ------------------------------------------------------------------------------------------ routing

    const handlers: Handlers = {
      ...routeHandlers({ runs, preparations, replies, subscriberStallTimeout: config.subscriberStallTimeout }),
      heartbeat: (message) => {
        CoreMetrics.heartbeatUnsafe(metricContext)
        const payload = message.payload
        const next: Declaration = {
          kinds: new Map((payload.supported_agent_kinds ?? []).map((k) => [k.kind, k])),
          daemonVersion: payload.daemon_version,
          activeRequests: payload.active_requests,
          ts: payload.ts,
          receivedAtMs: clock.currentTimeMillisUnsafe()
        }
        declaration = Option.some(next)
        options.onDeclared(next)
        return undefined
      },
    }

    const onInvalid = (error: Envelope.InvalidFrame): Effect.Effect<void> => {
      CoreMetrics.invalidFrameUnsafe(metricContext, error.bytes, error.code)
      if (tapQueue !== undefined) {
        tapFrame({
          direction: "runtime→core",
          type: error.type ?? "invalid",
          ...(error.id === undefined ? {} : { id: error.id }),
          bytes: error.bytes,
          invalid: error.code
        })
      }
      const annotations = {
        code: error.code,
        type: error.type ?? "",
        id: error.id ?? "",
        bytes: error.bytes
      }
      if (error.type === "heartbeat") {
        terminate("invalid_heartbeat")
        return Effect.logWarning("invalid heartbeat: declaration cleared, connection closed").pipe(
          Effect.annotateLogs(annotations)
        )
      }
      const observerFailed = failNamedObserver({ runs, preparations, replies }, error)
      // Bounded logging, and a close past the threshold (transport/internal/invalidFrames.ts).
      const verdict = invalidFrameBudget.admit(error.code, clock.currentTimeMillisUnsafe())
      const logged = logVerdict(
        verdict,
        Effect.logWarning(
          observerFailed ? "invalid frame: its observer failed with invalid_frame" : "invalid frame dropped"
        ).pipe(Effect.annotateLogs(annotations))
      )
      // Logged before the close, which ends this read loop.
      return verdict.close ? Effect.andThen(logged, Effect.sync(() => void terminate("invalid_frame", 1008))) : logged
    }

    const handleFrame = (frame: string | Uint8Array): Effect.Effect<void> | undefined => {
      // One envelope per text frame: a binary frame is refused as the daemon refuses it.
      const raw = typeof frame === "string" ? Envelope.decodeEnvelope(frame) : Envelope.refuseBinaryFrame(frame)
      if (Result.isFailure(raw)) return onInvalid(raw.failure)
      CoreMetrics.frameUnsafe(metricContext, "in", raw.success.bytes)
      const decoded = Messages.decodeRuntimeToCoreEnvelope(raw.success)
      if (Result.isFailure(decoded)) return onInvalid(decoded.failure)
      const message = decoded.success
      if (tapQueue !== undefined) {
        const id = "id" in message ? message.id : undefined
        tapFrame({
          direction: "runtime→core",
          type: message.type,
          ...(id === undefined ? {} : { id }),
          bytes: raw.success.bytes,
          message
        })
      }
      const handler = handlers[message.type] as (m: Messages.RuntimeToCore, bytes: number) => Effect.Effect<void> | undefined
      return handler(message, raw.success.bytes)
    }

    // ------------------------------------------------------------------------------------------ run

    const run: Effect.Effect<ObservationLost> = Effect.gen(function*() {
      const routeSlice = 16
      const readLoop = Effect.gen(function*() {
        while (ended === undefined) {
          const frames = yield* transport.pull
          lastInbound = clock.currentTimeMillisUnsafe()
          for (let i = 0; i < frames.length && ended === undefined; i++) {
            const effect = handleFrame(frames[i]!)
            if (effect !== undefined) {
              holding = true
              yield* effect
              holding = false
              lastInbound = clock.currentTimeMillisUnsafe()
            }
            // One socket read can hold hundreds of small frames: let subscribers drain their bounded buffers
            // between slices instead of routing the whole burst first. The loop still never waits on a subscriber.
            if ((i + 1) % routeSlice === 0) yield* Effect.yieldNow
          }
        }
      })

      const livenessMs = Duration.toMillis(config.livenessTimeout)
      /** Milliseconds until the liveness deadline the last inbound frame set. */
      const remaining = () => (holding ? livenessMs : lastInbound + livenessMs - clock.currentTimeMillisUnsafe())
      // Sleeps to the deadline, again while inbound frames keep moving it; then closes (once).
      const liveness = Effect.suspend(() => Effect.sleep(Duration.millis(Math.max(0, remaining())))).pipe(
        Effect.repeat({ until: () => ended !== undefined || remaining() <= 0 }),
        Effect.andThen(Effect.suspend(() =>
          ended === undefined && terminate("liveness_timeout")
            ? Effect.logWarning("no inbound frame within the liveness timeout; closing").pipe(
              Effect.annotateLogs({ timeout_ms: livenessMs })
            )
            : Effect.void
        ))
      )

      yield* readLoop.pipe(
        Effect.catchCause((cause) =>
          Effect.suspend(() => {
            const first = terminate("disconnected")
            return first
              ? Effect.logInfo("connection ended").pipe(
                Effect.annotateLogs({ cause: describeEnd(cause) })
              )
              : Effect.void
          })
        ),
        Effect.forkScoped
      )
      yield* transport.ended.pipe(
        Effect.flatMap(() => Effect.sync(() => terminate("disconnected"))),
        Effect.forkScoped
      )
      yield* Effect.forkScoped(liveness)
      if (tapQueue !== undefined) {
        yield* Queue.take(tapQueue).pipe(
          Effect.flatMap((frame) => tap.onFrame(frame)),
          Effect.catchCause((cause) => Effect.logWarning("frame tap failed", cause)),
          Effect.forever,
          Effect.forkScoped
        )
      }
      return yield* Deferred.await(closeSignal)
    }).pipe(
      Effect.scoped,
      Effect.ensuring(
        Effect.suspend(() => {
          terminate(options.interruptedReason())
          return transport.close(ended!.code, ended!.lost.reason)
        })
      ),
      Effect.annotateLogs({ device_id: deviceId, connection: connectionNumber })
    )

    const session: DeviceSession = {
      deviceId,
      connectionNumber,
      send,
      declaration: Effect.sync(() => declaration),
      subscribeDurable: (runId) => runs.subscribe(runId),
      subscribePreparation: (requestId) => preparations.subscribe(requestId),
      expectReplies: (family, key) => replies.register(family, key),
      closed: Deferred.await(closeSignal),
      close: (code, reason) => Effect.sync(() => void terminate(reason, code))
    }
    return { session, run }
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
