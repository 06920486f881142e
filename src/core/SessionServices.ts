/**
 * The parts of one device session (one authenticated Runtime connection), each a `Context.Service` provided by
 * `SessionLayer` (DeviceSession.ts), which is built fresh inside the connection's scope, the way the daemon
 * builds its `ConnectionLayer`. Nothing here outlives that scope and nothing is shared between connections: a
 * replacing connection starts with empty routes, no declaration, no liveness history and a fresh invalid-frame
 * budget.
 *
 * Every part is used from the connection's read loop or a caller's fiber without waiting: state changes happen in
 * synchronous sections only (the routes are bounded maps; see Subscriptions.ts and Correlator.ts).
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Option, Queue, type Scope } from "effect"
import { type Capabilities, type Ids, Limits } from "../proto/index.js"
import * as Correlator from "./Correlator.js"
import { ObservationLost, type ObservationLostReason } from "./Errors.js"
import type { FrameTapShape, TappedFrame } from "./FrameTap.js"
import type { GatewayConfigShape } from "./GatewayConfig.js"
import * as LivenessWheel from "./LivenessWheel.js"
import type { PreparationRoutes, RunRoutes } from "./Subscriptions.js"
import { makePreparationRoutes, makeRunRoutes } from "./Subscriptions.js"
import type { ReplyFamilies } from "./ReplyFamilies.js"
import { closeCodeFor, type DeviceTransport } from "./transport/DeviceTransport.js"

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

// ---------------------------------------------------------------------------------------------- SessionInfo

/** What the gateway knows about one authenticated connection when it builds its session. */
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
  /** The gateway's shared liveness timer; without one the connection runs a timer of its own. */
  readonly liveness?: LivenessWheel.LivenessWheel
}

/** The connection's identity, transport and configuration (the inputs of `SessionLayer`). */
export class SessionInfo extends Context.Service<SessionInfo, SessionOptions>()("agentwire/core/SessionInfo") {
  static readonly layer = (options: SessionOptions) => Layer.succeed(SessionInfo, options)
}

// ---------------------------------------------------------------------------------------------- SessionRoutes

/** Where the read loop routes inbound frames: Run routes, preparation routes and the one reply Correlator. */
export class SessionRoutes extends Context.Service<SessionRoutes, {
  readonly runs: RunRoutes
  readonly preparations: PreparationRoutes
  readonly replies: Correlator.Correlator<ReplyFamilies>
  /** How long the read loop waits for room in a full Run subscriber before that consumer counts as gone. */
  readonly subscriberStallTimeout: Duration.Duration
}>()("agentwire/core/SessionRoutes") {
  static readonly layer = Layer.effect(
    SessionRoutes,
    Effect.gen(function*() {
      const { config } = yield* SessionInfo
      return SessionRoutes.of({
        runs: makeRunRoutes({
          buffer: config.runSubscriptionBuffer,
          maxSubscriptions: config.maxRunSubscriptions,
          maxInteractionRoutes: config.maxInteractionRoutes
        }),
        preparations: makePreparationRoutes({
          buffer: Limits.PreparationSubscriptionBuffer,
          maxSubscriptions: Limits.MaxPreparationSubscriptions
        }),
        replies: Correlator.make<ReplyFamilies>({ capacity: config.maxReplyWaiters, buffer: config.replyBuffer }),
        subscriberStallTimeout: config.subscriberStallTimeout
      })
    })
  )
}

// ---------------------------------------------------------------------------------------------- SessionDeclaration

/** The connection's declaration snapshot: `None` before the first valid heartbeat and after the end. */
export class SessionDeclaration extends Context.Service<SessionDeclaration, {
  readonly get: Effect.Effect<Option.Option<Declaration>>
  /** Replaces the snapshot with a valid heartbeat's declaration and reports it (`onDeclared`). Synchronous. */
  readonly declare: (next: Declaration) => void
  /** Forgets the snapshot (invalid heartbeat, connection end): nothing is admitted on it any more. */
  readonly clear: () => void
}>()("agentwire/core/SessionDeclaration") {
  static readonly layer = Layer.effect(
    SessionDeclaration,
    Effect.gen(function*() {
      const { onDeclared } = yield* SessionInfo
      let declaration: Option.Option<Declaration> = Option.none()
      return SessionDeclaration.of({
        get: Effect.sync(() => declaration),
        declare: (next) => {
          declaration = Option.some(next)
          onDeclared(next)
        },
        clear: () => {
          declaration = Option.none()
        }
      })
    })
  )
}

// ---------------------------------------------------------------------------------------------- SessionEnd

/** How the connection ended: the reason every observer got, and the close code to send. */
export interface Ended {
  readonly lost: ObservationLost
  readonly code: number
}

/** The connection's end: decided once, and at that instant every observer of the connection ends with it. */
export class SessionEnd extends Context.Service<SessionEnd, {
  /**
   * Ends observation of everything on this connection, synchronously and once: clears the declaration, fails
   * every Run, preparation and reply subscriber with `ObservationLost(reason)`, and completes `closed`. True
   * for the call that ended it; later calls change nothing (the first reason wins).
   */
  readonly terminate: (reason: ObservationLostReason, code?: number) => boolean
  /** The end, once decided. */
  readonly ended: () => Ended | undefined
  /** Completes with the reason when the connection ends. */
  readonly closed: Effect.Effect<ObservationLost>
}>()("agentwire/core/SessionEnd") {
  static readonly layer = Layer.effect(
    SessionEnd,
    Effect.gen(function*() {
      const { preparations, replies, runs } = yield* SessionRoutes
      const declaration = yield* SessionDeclaration
      const closeSignal = yield* Deferred.make<ObservationLost>()
      let ended: Ended | undefined
      return SessionEnd.of({
        terminate: (reason, code = closeCodeFor(reason)) => {
          if (ended !== undefined) return false
          const lost = new ObservationLost({ reason })
          ended = { lost, code }
          declaration.clear()
          runs.close(lost)
          preparations.close(lost)
          replies.close(lost)
          Deferred.doneUnsafe(closeSignal, Exit.succeed(lost))
          return true
        },
        ended: () => ended,
        closed: Deferred.await(closeSignal)
      })
    })
  )
}

// ---------------------------------------------------------------------------------------------- SessionTap

/**
 * The connection's side of the frame tap (FrameTap.ts): a bounded buffer drained by a fiber of the connection's
 * scope. `enabled` is false for the default no-op tap, and then no tap work happens at all.
 */
export class SessionTap extends Context.Service<SessionTap, {
  readonly enabled: boolean
  /** Offers one frame without waiting (dropped for the tap only when its buffer is full). */
  readonly frame: (frame: Omit<TappedFrame, "deviceId" | "connectionNumber" | "at">) => void
}>()("agentwire/core/SessionTap") {
  static readonly layer = Layer.effect(
    SessionTap,
    Effect.gen(function*() {
      const { config, connectionNumber, deviceId, tap } = yield* SessionInfo
      if (!tap.enabled) return SessionTap.of({ enabled: false, frame: () => {} })
      const clock = yield* Clock.Clock
      const queue = yield* Queue.dropping<TappedFrame>(config.tapBuffer)
      yield* Queue.take(queue).pipe(
        Effect.flatMap((frame) => tap.onFrame(frame)),
        Effect.catchCause((cause) => Effect.logWarning("frame tap failed", cause)),
        Effect.forever,
        Effect.forkScoped
      )
      return SessionTap.of({
        enabled: true,
        frame: (frame) => {
          Queue.offerUnsafe(queue, { ...frame, deviceId, connectionNumber, at: clock.currentTimeMillisUnsafe() })
        }
      })
    })
  )
}

// ---------------------------------------------------------------------------------------------- SessionLiveness

/**
 * The liveness deadline (protocol "Heartbeats and liveness"): the connection ends with `liveness_timeout` when no
 * inbound frame arrived within `GatewayConfig.livenessTimeout`. It counts from the moment the connection was
 * accepted, not from when reading starts; while the read loop waits for room in a full Run subscriber nothing is
 * read, so the deadline does not run then (it restarts once reading resumes). The deadline is checked by the
 * gateway's one shared timer (`LivenessWheel`), not by a fiber of this connection.
 */
export class SessionLiveness extends Context.Service<SessionLiveness, {
  /** An inbound frame arrived (or routing resumed): the deadline restarts now. */
  readonly received: () => void
  /** The read loop waits for a subscriber (true) or reads again (false). */
  readonly holding: (holding: boolean) => void
  /** Watches the deadline until the caller's scope closes; when it passes, ends the connection (once). */
  readonly watch: Effect.Effect<void, never, Scope.Scope>
}>()("agentwire/core/SessionLiveness") {
  static readonly layer = Layer.effect(
    SessionLiveness,
    Effect.gen(function*() {
      const { config, liveness } = yield* SessionInfo
      const end = yield* SessionEnd
      const clock = yield* Clock.Clock
      const livenessMs = Duration.toMillis(config.livenessTimeout)
      let lastInbound = clock.currentTimeMillisUnsafe()
      let holding = false
      /** Milliseconds until the liveness deadline the last inbound frame set. */
      const remaining = () => (end.ended() !== undefined ? 0 : holding ? livenessMs : lastInbound + livenessMs - clock.currentTimeMillisUnsafe())
      const expire = Effect.suspend(() =>
        end.ended() === undefined && end.terminate("liveness_timeout")
          ? Effect.logWarning("no inbound frame within the liveness timeout; closing").pipe(
            Effect.annotateLogs({ timeout_ms: livenessMs })
          )
          : Effect.void
      )
      const watch = Effect.gen(function*() {
        const wheel = liveness ?? (yield* LivenessWheel.make)
        yield* wheel.watch({ remaining, expire })
      })
      return SessionLiveness.of({
        received: () => {
          lastInbound = clock.currentTimeMillisUnsafe()
        },
        holding: (next) => {
          holding = next
        },
        watch
      })
    })
  )
}
