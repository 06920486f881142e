/**
 * The state of one device session (one authenticated Runtime connection) as ONE plain record (issue 18,
 * per-connection cost): its routes, declaration snapshot, end, liveness deadline and tap buffer. It used to be
 * nine `Context.Service`s built per connection by `Layer.buildWithScope` (a MemoMap, a flattened Context per
 * service and an object of closures each, about 30 KiB per idle connection); now the gateway-wide functions of
 * SessionInbound.ts (read side) and SessionOutbound.ts (send side) take this record as their argument, and its
 * own behaviour lives on the class prototype, so an idle connection costs its fields.
 *
 * Nothing here outlives the connection and nothing is shared between connections: a replacing connection
 * starts with empty routes, no declaration, no liveness history and a fresh invalid-frame budget.
 *
 * Every part is used from the connection's read side or a caller's fiber without waiting: state changes happen in
 * synchronous sections only (the routes are bounded maps; see Subscriptions.ts and Correlator.ts).
 */
import { type Clock, type Context, Deferred, Duration, Effect, Exit, type Fiber, Option, Queue, type Scheduler } from "effect"
import { type Capabilities, type DeltaFrame, type HeartbeatFrame, type Ids, Limits } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import * as Correlator from "./Correlator.js"
import { ObservationLost, type ObservationLostReason } from "./Errors.js"
import type { FrameTapShape, TappedFrame } from "./FrameTap.js"
import type { GatewayConfigShape } from "./GatewayConfig.js"
import type * as LivenessWheel from "./LivenessWheel.js"
import type { PreparationRoutes, RunRoutes } from "./Subscriptions.js"
import { makePreparationRoutes, makeRunRoutes } from "./Subscriptions.js"
import type { ReplyFamilies } from "./ReplyFamilies.js"
import { closeCodeFor, type DeviceTransport } from "./transport/DeviceTransport.js"
import { type InvalidFrameBudget, makeInvalidFrameBudget } from "./transport/internal/invalidFrames.js"

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

/** A frame kept while the read side holds: its text, a binary frame's bytes, or a Run's delta already read. */
export type PendingFrame = string | Uint8Array | DeltaFrame.Delta

/** What the gateway knows about one authenticated connection when it builds its session. */
export interface SessionOptions {
  readonly deviceId: Ids.DeviceId
  readonly connectionNumber: number
  readonly transport: DeviceTransport
  readonly config: GatewayConfigShape
  readonly tap: FrameTapShape
  /**
   * Called on the read side for every valid heartbeat; must not block (e.g. publish to an unbounded PubSub).
   * `changed` is false when the declaration is the connection's previous one (same daemon version, kinds,
   * availability, versions and capabilities: only the liveness facts moved).
   */
  readonly onDeclared: (declaration: Declaration, changed: boolean) => void
  /** The gateway's shared liveness timer (the session adds itself when it starts and leaves at its end). */
  readonly liveness: LivenessWheel.LivenessWheel
  /** The context metrics are recorded in (the gateway's); the connection fiber's when absent. */
  readonly metricContext?: Context.Context<never>
}

/** How the connection ended: the reason every observer got, and the close code to send. */
export interface Ended {
  readonly lost: ObservationLost
  readonly code: number
}

/**
 * One connection's state. Built by `DeviceSession.start`; the read side routes into `runs`, `preparations` and
 * `replies`, the send side refuses once `ended` is set.
 *
 * Liveness (protocol "Heartbeats and liveness"): the connection ends with `liveness_timeout` when no inbound
 * frame arrived within `GatewayConfig.livenessTimeout`. It counts from the moment the connection was accepted,
 * not from when reading starts; while the read side waits for room in a full Run subscriber nothing is read, so
 * the deadline does not run then (it restarts once reading resumes). The record is itself the entry the
 * gateway's one shared timer (`LivenessWheel`) checks, not a fiber of this connection.
 */
export class SessionState implements LivenessWheel.LivenessWatch {
  readonly runs: RunRoutes
  readonly preparations: PreparationRoutes
  readonly replies: Correlator.Correlator<ReplyFamilies>
  /**
   * The declaration of the last heartbeat that changed it (or began it), with that heartbeat's liveness facts;
   * undefined before the first valid heartbeat and after the end. A repeated heartbeat only writes the liveness
   * fields below, in place: no object per heartbeat that lives until the next one, 15 s later, and so is promoted
   * to V8's old generation, whose marking was most of an idle device's CPU (issue 18; `declared` builds the view).
   */
  declaredBase: Declaration | undefined = undefined
  /** The latest valid heartbeat's liveness facts (`Declaration.activeRequests`, `ts`, `receivedAtMs`). */
  private activeRequests = 0
  private ts = 0
  private receivedAtMs = 0
  /**
   * The text of the heartbeat that set `declared`, split around its liveness numbers (`HeartbeatFrame`): a later
   * heartbeat that differs only in them is read without the generic decode (issue 18).
   */
  heartbeatTemplate: HeartbeatFrame.HeartbeatTemplate | undefined = undefined
  /** The end, once decided. */
  ended: Ended | undefined = undefined
  /** Core's clock (Unix ms) at the first frame of the last socket read that carried any (or when routing resumed). */
  lastInbound: number
  /** The read side waits (for room in a full Run subscriber, or a log line): the deadline does not run. */
  holding = false
  /**
   * Frames that arrived while the read side held, routed in order once it is released (bounded: the socket is
   * paused). A Run's delta of the connection's layout is kept as the delta `DeltaFrame.matchBytes` read from the
   * frame's bytes when it arrived (the same message its text would decode to), so it never needs its text.
   */
  pending: Array<PendingFrame> | undefined = undefined
  /**
   * The Run id and trace of the last `delta` the generic decoder accepted, as the layout of its
   * frames (`DeltaFrame.layout`): the next deltas of that Run are read by `DeltaFrame.match` (issue 18).
   */
  deltaLayout: DeltaFrame.Layout | undefined = undefined
  /** The byte size the transport gave with each pending frame (`InboundHandlers.onFrame`), by position. */
  pendingBytes: Array<number | undefined> = []
  /** How many pending frames were routed (a cursor: no `shift` per frame). */
  pendingAt = 0
  /** The fiber the read side waits for while it holds. */
  holdFiber: Fiber.Fiber<void> | undefined = undefined
  /** Continues routing after a yield of the read side (`SessionInbound.drain`; made at the first yield). */
  yieldTask: (() => void) | undefined = undefined
  /** Where that task is scheduled: a dispatcher of the connection's context's scheduler (made at the first yield). */
  dispatcher: Scheduler.SchedulerDispatcher | undefined = undefined
  /** Runs a read-side effect in the connection's context (set when the connection starts reading). */
  fork: ((effect: Effect.Effect<void>) => Fiber.Fiber<void>) | undefined = undefined
  private budget: InvalidFrameBudget | undefined = undefined
  private readonly closeSignal: Deferred.Deferred<ObservationLost>
  /** The tap's bounded buffer (drained by a fiber of the connection, ended with it); undefined for the no-op tap. */
  tapQueue: Queue.Queue<TappedFrame> | undefined = undefined
  /** Inbound frames and bytes read in the current job, not yet in the registry (`CoreMetrics.InboundCount`). */
  readonly inbound: CoreMetrics.InboundCount
  /** Runs once, synchronously, right after `terminate` decided the end (the session's end sequence). */
  onTerminated: (() => void) | undefined = undefined

  constructor(
    readonly options: SessionOptions,
    readonly clock: Clock.Clock,
    /** The context metrics are recorded in (the gateway's). */
    readonly metricContext: Context.Context<never>
  ) {
    const { config } = options
    this.runs = makeRunRoutes({
      buffer: config.runSubscriptionBuffer,
      maxSubscriptions: config.maxRunSubscriptions,
      maxInteractionRoutes: config.maxInteractionRoutes
    })
    this.preparations = makePreparationRoutes({
      buffer: Limits.PreparationSubscriptionBuffer,
      maxSubscriptions: Limits.MaxPreparationSubscriptions
    })
    this.replies = Correlator.make<ReplyFamilies>({ capacity: config.maxReplyWaiters, buffer: config.replyBuffer })
    this.closeSignal = Deferred.makeUnsafe<ObservationLost>()
    this.lastInbound = clock.currentTimeMillisUnsafe()
    this.inbound = new CoreMetrics.InboundCount(metricContext)
  }

  get transport(): DeviceTransport {
    return this.options.transport
  }

  /** The invalid-frame budget, made at the first invalid frame (a conforming Runtime sends none). */
  get invalidFrameBudget(): InvalidFrameBudget {
    return this.budget ??= makeInvalidFrameBudget()
  }

  /** The latest valid declaration: `None` before the first valid heartbeat and after the end. */
  get declared(): Option.Option<Declaration> {
    const base = this.declaredBase
    return base === undefined ? Option.none() : Option.some(this.withLiveness(base))
  }

  /** Replaces the snapshot with a valid heartbeat's declaration and reports it (`onDeclared`). Synchronous. */
  declare(next: Declaration, changed: boolean): void {
    this.declaredBase = next
    this.activeRequests = next.activeRequests
    this.ts = next.ts
    this.receivedAtMs = next.receivedAtMs
    this.options.onDeclared(next, changed)
  }

  /**
   * A heartbeat that repeats the declaration (`changed: false`) with new liveness facts: they are written in place
   * and `onDeclared` gets the declaration as of this heartbeat (a fresh object each time, which no one here keeps).
   * Synchronous; nothing happens without a declaration.
   */
  redeclare(activeRequests: number, ts: number, receivedAtMs: number): void {
    const base = this.declaredBase
    if (base === undefined) return
    this.activeRequests = activeRequests
    this.ts = ts
    this.receivedAtMs = receivedAtMs
    this.options.onDeclared(this.withLiveness(base), false)
  }

  private withLiveness(base: Declaration): Declaration {
    return {
      kinds: base.kinds,
      daemonVersion: base.daemonVersion,
      activeRequests: this.activeRequests,
      ts: this.ts,
      receivedAtMs: this.receivedAtMs
    }
  }

  /**
   * Ends observation of everything on this connection, synchronously and once: clears the declaration, fails
   * every Run, preparation and reply subscriber with `ObservationLost(reason)`, and completes `closed`. True
   * for the call that ended it; later calls change nothing (the first reason wins).
   */
  terminate(reason: ObservationLostReason, code: number = closeCodeFor(reason)): boolean {
    if (this.ended !== undefined) return false
    const lost = new ObservationLost({ reason })
    this.ended = { lost, code }
    this.declaredBase = undefined
    this.runs.close(lost)
    this.preparations.close(lost)
    this.replies.close(lost)
    Deferred.doneUnsafe(this.closeSignal, Exit.succeed(lost))
    this.onTerminated?.()
    return true
  }

  /** Completes with the reason when the connection ends. */
  get closed(): Effect.Effect<ObservationLost> {
    return Deferred.await(this.closeSignal)
  }

  /** A socket read's first frame arrived (or routing resumed): the deadline restarts now. */
  received(): void {
    this.lastInbound = this.clock.currentTimeMillisUnsafe()
  }

  /** Milliseconds until the liveness deadline the last inbound frame set (the LivenessWheel asks). */
  remaining(): number {
    if (this.ended !== undefined) return 0
    const livenessMs = Duration.toMillis(this.options.config.livenessTimeout)
    return this.holding ? livenessMs : this.lastInbound + livenessMs - this.clock.currentTimeMillisUnsafe()
  }

  /** The deadline passed: ends the connection (once). */
  get expire(): Effect.Effect<void> {
    return Effect.suspend(() =>
      this.ended === undefined && this.terminate("liveness_timeout")
        ? Effect.logWarning("no inbound frame within the liveness timeout; closing").pipe(
          Effect.annotateLogs({ timeout_ms: Duration.toMillis(this.options.config.livenessTimeout) })
        )
        : Effect.void
    )
  }

  /** Offers one frame to the tap without waiting (dropped for the tap only when its buffer is full). */
  tapFrame(frame: Omit<TappedFrame, "deviceId" | "connectionNumber" | "at">): void {
    if (this.tapQueue === undefined) return
    const { connectionNumber, deviceId } = this.options
    Queue.offerUnsafe(this.tapQueue, { ...frame, deviceId, connectionNumber, at: this.clock.currentTimeMillisUnsafe() })
  }
}
