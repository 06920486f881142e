/**
 * Core's registry of Runtime connections by device (protocol "Ownership and connection"; reference §1.5
 * "After the upgrade").
 *
 * Owns: the current session of each device, the per-device fencing of connection ownership, and the
 * gateway's event stream. A newer connection for a device replaces the previous one: the registry entry is
 * swapped first (the owner lease moves to the new connection number), then the old session is closed with
 * `ObservationLost("replaced")`, which ends its Run subscriptions, preparation subscriptions and reply
 * waiters at once and closes its transport. The new connection inherits none of them: every route lives in
 * its own session. An old connection that ends later never removes the newer entry.
 *
 * Never: replays anything on a new connection, settles an execution, or invents a terminal event. Shutdown
 * closes every session with `ObservationLost("gateway_shutdown")` and refuses new connections.
 *
 * Events (`Connected`, `Declared` for each valid heartbeat, `Disconnected{reason}`) are published without
 * waiting (unbounded PubSub); the dev Core persists devices and declarations from them. Per device they are
 * ordered: a replaced connection's `Disconnected` precedes its successor's `Connected`, and a connection
 * publishes nothing after its `Disconnected`.
 */
import { Context, Deferred, Effect, Exit, Layer, Option, PubSub, type Scope, Stream } from "effect"
import type { Ids } from "../proto/index.js"
import type { DeviceRecord } from "./DeviceCredentials.js"
import * as CoreMetrics from "./CoreMetrics.js"
import * as DeviceSession from "./DeviceSession.js"
import { ObservationLost, type ObservationLostReason } from "./Errors.js"
import { FrameTap } from "./FrameTap.js"
import { GatewayConfig } from "./GatewayConfig.js"
import * as KindIndex from "./KindIndex.js"
import * as LivenessWheel from "./LivenessWheel.js"
import { closeCodeFor, type DeviceTransport } from "./transport/DeviceTransport.js"

/** What the gateway reports about connections. */
export type GatewayEvent =
  | {
    readonly _tag: "Connected"
    readonly deviceId: Ids.DeviceId
    readonly workspaceId: string
    readonly connectionNumber: number
    /** Core's clock (Unix ms). */
    readonly at: number
  }
  | {
    /** A valid heartbeat replaced the connection's declaration snapshot. */
    readonly _tag: "Declared"
    readonly deviceId: Ids.DeviceId
    readonly connectionNumber: number
    readonly declaration: DeviceSession.Declaration
    /**
     * False when the declaration is this connection's previous one (daemon version, kinds, availability,
     * versions and capabilities unchanged: only `ts`, active requests and arrival moved). The first heartbeat of
     * a connection is always a change.
     */
    readonly changed: boolean
  }
  | {
    readonly _tag: "Disconnected"
    readonly deviceId: Ids.DeviceId
    readonly connectionNumber: number
    readonly reason: ObservationLostReason
    readonly at: number
  }

export interface GatewayShape {
  /** The device's current session, if it is connected. A replaced or ended session is never returned. */
  readonly session: (deviceId: Ids.DeviceId) => Effect.Effect<Option.Option<DeviceSession.DeviceSession>>
  /** Every current session (one per connected device). */
  readonly sessions: Effect.Effect<ReadonlyArray<DeviceSession.DeviceSession>>
  /**
   * The current sessions whose latest declaration advertises Harness `kind` (an index kept by the gateway, so
   * device selection never walks other devices; issue 18), in the order they began advertising it. A live
   * view: walk it without holding it.
   */
  readonly advertising: (kind: string) => Effect.Effect<Iterable<DeviceSession.DeviceSession>>
  /** How many devices are connected, and how many of them have a declaration (a valid heartbeat). */
  readonly counts: Effect.Effect<{ readonly connected: number; readonly declared: number }>
  /**
   * Subscribes to gateway events now (nothing published after this call is missed) for the lifetime of the
   * caller's scope, and returns them as a stream.
   */
  readonly events: Effect.Effect<Stream.Stream<GatewayEvent>, never, Scope.Scope>
  /**
   * Calls `listener` with every gateway event from now until the caller's scope closes, synchronously as it is
   * published (in publish order, on the publisher: a connection's read side for `Declared`). For bookkeeping of
   * every heartbeat without a fiber woken per heartbeat (issue 18): the listener must be quick, must not block
   * and must not throw.
   */
  readonly listen: (listener: (event: GatewayEvent) => void) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Runs one authenticated connection until it ends: registers it as the device's session (replacing and
   * fencing a previous one), publishes `Connected`, reads and routes frames, and on the end unregisters it
   * (only if it is still the device's session) and publishes `Disconnected`. Returns the reason after every
   * observer of the connection has ended with it. The caller owns the transport's scope; interrupting this
   * effect ends the connection (`gateway_shutdown` during shutdown, `disconnected` otherwise).
   */
  readonly accept: (device: DeviceRecord, transport: DeviceTransport) => Effect.Effect<ObservationLost>
  /**
   * `accept` without waiting (issue 18, per-connection cost): registers the connection, publishes `Connected`
   * and starts reading, then returns. The connection then holds no fiber while idle; its end (close, peer,
   * liveness, replacement, shutdown) closes the transport, unregisters it and publishes `Disconnected` on a
   * fiber of its own. The transport must outlive the caller (the route's upgrade scope is released by the
   * transport's end, not by the caller's).
   */
  readonly open: (device: DeviceRecord, transport: DeviceTransport) => Effect.Effect<void>
  /**
   * Refuses new connections and closes every session with `ObservationLost("gateway_shutdown")`, waiting
   * until each has ended. Idempotent; also runs when the gateway's layer scope closes.
   */
  readonly shutdown: Effect.Effect<void>
}

interface Entry {
  readonly session: DeviceSession.DeviceSession
  readonly finished: Deferred.Deferred<ObservationLost>
  disconnected: boolean
}

const make = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const tap = yield* FrameTap
  const events = yield* PubSub.unbounded<GatewayEvent>()
  /** Synchronous observers of every event (`listen`). */
  const listeners = new Set<(event: GatewayEvent) => void>()
  const publish = (event: GatewayEvent): void => {
    PubSub.publishUnsafe(events, event)
    for (const listener of listeners) listener(event)
  }
  const registry = new Map<string, Entry>()
  const live = new Set<Entry>()
  /** Registered entries by the kinds their latest declaration advertises. */
  const kinds = KindIndex.make<Entry>()
  /** One liveness timer for every connection (a fiber per connection before; issue 18). */
  const liveness = yield* LivenessWheel.make
  /** Metrics of every connection are recorded in the gateway's context (not a Context per connection). */
  const metricContext = yield* Effect.context<never>()
  let connections = 0
  let shuttingDown = false

  /** Publishes an entry's Disconnected once (the replacement path publishes it before the successor's Connected). */
  const publishDisconnected = (entry: Entry, reason: ObservationLostReason) =>
    Effect.gen(function*() {
      if (entry.disconnected) return
      entry.disconnected = true
      const { connectionNumber, deviceId } = entry.session
      const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      publish({ _tag: "Disconnected", deviceId, connectionNumber, reason, at })
      yield* Effect.logInfo("runtime disconnected").pipe(
        Effect.annotateLogs({ device_id: deviceId, connection: connectionNumber, reason })
      )
    })

  /** Registers and starts one connection; its end runs `ended` (on the session's end fiber). No fiber while idle. */
  const start = Effect.fn("Gateway.open")(function*(device: DeviceRecord, transport: DeviceTransport) {
    const deviceId = device.deviceId as Ids.DeviceId
    const finished = Deferred.makeUnsafe<ObservationLost>()
    if (shuttingDown) {
      yield* transport.close(closeCodeFor("gateway_shutdown"), "gateway_shutdown")
      Deferred.doneUnsafe(finished, Exit.succeed(new ObservationLost({ reason: "gateway_shutdown" })))
      return { finished, session: undefined }
    }
    const connectionNumber = ++connections
    let registered: Entry | undefined
    const ended = (lost: ObservationLost) =>
      Effect.gen(function*() {
        const entry = registered
        if (entry === undefined) return
        if (registry.get(deviceId) === entry) registry.delete(deviceId)
        kinds.remove(entry)
        if (live.delete(entry)) yield* CoreMetrics.connection("closed")
        yield* publishDisconnected(entry, lost.reason)
        Deferred.doneUnsafe(finished, Exit.succeed(lost))
      })
    const { begin, session } = yield* DeviceSession.start({
      deviceId,
      connectionNumber,
      transport,
      config,
      tap,
      onDeclared: (declaration, changed) => {
        if (changed && registered !== undefined && registry.get(deviceId) === registered) {
          kinds.declare(registered, declaration.kinds.keys())
        }
        publish({ _tag: "Declared", deviceId, connectionNumber, declaration, changed })
      },
      liveness,
      metricContext
    }, ended)
    const entry: Entry = { session, finished, disconnected: false }
    registered = entry
    // Fence: the registry moves to this connection before the previous one is closed, so no caller can
    // obtain the old session once the new one is registered.
    const previous = registry.get(deviceId)
    registry.set(deviceId, entry)
    if (previous !== undefined) kinds.remove(previous)
    live.add(entry)
    yield* CoreMetrics.connection("accepted")
    if (previous !== undefined) {
      yield* previous.session.close(closeCodeFor("replaced"), "replaced")
      yield* Effect.logInfo("connection replaced by a newer one").pipe(
        Effect.annotateLogs({ device_id: deviceId, connection: previous.session.connectionNumber, by: connectionNumber })
      )
      yield* publishDisconnected(previous, "replaced")
    }
    const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    publish({ _tag: "Connected", deviceId, workspaceId: device.workspaceId, connectionNumber, at })
    yield* Effect.logInfo("runtime connected").pipe(
      Effect.annotateLogs({ device_id: deviceId, connection: connectionNumber })
    )
    begin()
    return { finished, session }
  }, Effect.uninterruptible)

  const open = (device: DeviceRecord, transport: DeviceTransport) => Effect.asVoid(start(device, transport))

  const accept = (device: DeviceRecord, transport: DeviceTransport) =>
    Effect.flatMap(start(device, transport), ({ finished, session }) =>
      Deferred.await(finished).pipe(
        Effect.onInterrupt(() =>
          session === undefined
            ? Effect.void
            : Effect.suspend(() => {
              const reason = shuttingDown ? "gateway_shutdown" : "disconnected"
              return Effect.andThen(session.close(closeCodeFor(reason), reason), Deferred.await(finished))
            })
        )
      ))

  const shutdown = Effect.gen(function*() {
    shuttingDown = true
    const entries = [...live]
    for (const entry of entries) {
      yield* entry.session.close(closeCodeFor("gateway_shutdown"), "gateway_shutdown")
    }
    for (const entry of entries) yield* Deferred.await(entry.finished)
  }).pipe(Effect.withSpan("Gateway.shutdown"))

  yield* Effect.addFinalizer(() => shutdown)

  return Gateway.of({
    session: (deviceId) => Effect.sync(() => Option.map(Option.fromNullishOr(registry.get(deviceId)), (e) => e.session)),
    sessions: Effect.sync(() => [...registry.values()].map((e) => e.session)),
    advertising: (kind) =>
      Effect.sync(() => {
        const entries = kinds.advertising(kind)
        return {
          *[Symbol.iterator]() {
            for (const entry of entries) yield entry.session
          }
        }
      }),
    counts: Effect.sync(() => ({ connected: registry.size, declared: kinds.declared() })),
    events: Effect.map(PubSub.subscribe(events), Stream.fromSubscription),
    listen: (listener) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          // A wrapper per call, so the same function listening twice is two listeners.
          const entry = (event: GatewayEvent) => listener(event)
          listeners.add(entry)
          return entry
        }),
        (entry) => Effect.sync(() => listeners.delete(entry))
      ).pipe(Effect.asVoid),
    accept,
    open,
    shutdown
  })
})

export class Gateway extends Context.Service<Gateway, GatewayShape>()("agentwire/core/Gateway") {
  /** The gateway; its scope's end shuts it down (every session ends with `gateway_shutdown`). */
  static readonly layer: Layer.Layer<Gateway, never, GatewayConfig> = Layer.effect(Gateway, make)
}
