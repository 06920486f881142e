/**
 * One physical connection's logic (protocol "Ownership and connection"; style guide §7.6). Builds the
 * per-connection state fresh (routing, admission handles, Runs, receipts), sends the heartbeat at once and
 * then on schedule, and consumes `Transport.inbound` until it ends or a `device_shutdown` drain completes.
 *
 * It is one `Effect.scoped`: it returns only after every resource of this connection has confirmed cleanup
 * (Runs stopped and their Turns settled or their Executors closed, preparations stopped, every Executor
 * closed until confirmed), so the daemon loop after it can never race owned resources and a failed cleanup
 * blocks reconnection. Nothing is replayed on a later connection. Process exit, a signal or an interrupted
 * local fiber is never reported to Core as a cancellation.
 */
import { Deferred, Effect, Layer, Scope, Stream } from "effect"
import { Admission } from "./Admission.js"
import { AppliedDecisions } from "./Applied.js"
import { Cancellation } from "./Cancellation.js"
import { Background, Drain, WorkspaceGate } from "./ConnectionServices.js"
import { DirectRuns } from "./DirectRuns.js"
import { Dispatcher } from "./Dispatcher.js"
import { Executors } from "./Executors.js"
import { Functions } from "./Functions.js"
import { HarnessRegistry, kindStatus } from "./harness/HarnessRegistry.js"
import * as Heartbeat from "./Heartbeat.js"
import { Interactions } from "./Interactions.js"
import { Outbound } from "./Outbound.js"
import { Ownership } from "./Ownership.js"
import type { RuntimeProcessServices } from "./RuntimeProcess.js"
import { RunLifecycle } from "./RunLifecycle.js"
import { Runs } from "./Runs.js"
import { StatusBoard } from "./StatusBoard.js"
import { Steering } from "./Steering.js"
import { Suspension } from "./Suspension.js"
import { ConnectionInfo, Transport, TransportClosed } from "./transport/Transport.js"
import { Transfer } from "./transfer/Transfer.js"
import { Workspace } from "./workspace/Workspace.js"

/** How a connection ended. Returned only after its cleanup confirmed. */
export type ConnectionEnd =
  | { readonly _tag: "TransportEnded"; readonly error: TransportClosed }
  | { readonly _tag: "ShutdownRequested" } // device_shutdown: drained and cleaned up; the daemon exits 0

/**
 * The per-connection services. Build order (and so reverse teardown order) follows the dependencies: the
 * Executor table first, then the shared connection services, the Run table, the families and the dispatcher.
 */
export const ConnectionLayer = Dispatcher.layer.pipe(
  Layer.provideMerge(Suspension.layer),
  Layer.provideMerge(Transfer.layer),
  Layer.provideMerge(Workspace.layer),
  Layer.provideMerge(Layer.mergeAll(
    Admission.layer,
    DirectRuns.layer,
    Cancellation.layer,
    Steering.layer,
    Interactions.layer,
    Functions.layer
  )),
  Layer.provideMerge(Runs.layer),
  Layer.provideMerge(Layer.mergeAll(Outbound.layer, Background.layer, Drain.layer, WorkspaceGate.layer, RunLifecycle.layer, AppliedDecisions.layer)),
  Layer.provideMerge(Executors.layer)
)

const connection = (info: ConnectionInfo["Service"]) => Effect.gen(function* () {
  const board = yield* StatusBoard
  const registry = yield* HarnessRegistry
  const daemonVersion = (yield* board.snapshot).daemon_version
  const scope = yield* Effect.scope
  // Forked before the layer is built, so it closes after the layer's finalizers: the view stays attached
  // while cleanup is being confirmed.
  const viewScope = yield* Scope.fork(scope, "sequential")
  const services = yield* Layer.buildWithScope(ConnectionLayer, scope)
  const ownership = yield* Ownership

  return yield* Effect.gen(function* () {
    const admission = yield* Admission
    const executors = yield* Executors
    const runs = yield* Runs
    const dispatcher = yield* Dispatcher
    const outbound = yield* Outbound
    const drain = yield* Drain
    yield* board.attachView(Effect.gen(function* () {
      return {
        active_runs: yield* runs.activeCount,
        admissions: yield* admission.view,
        executors: yield* executors.view,
        runs: yield* runs.view,
        unconfirmed: yield* ownership.unconfirmed
      }
    }), Effect.map(ownership.unconfirmed, (unconfirmed) => unconfirmed.length)).pipe(Scope.provide(viewScope))
    yield* board.setKinds((yield* registry.declarations).map(kindStatus))

    yield* Heartbeat.run({
      outbound,
      registry,
      activeRequests: runs.activeCount,
      daemonVersion,
      interval: info.heartbeatInterval
    }).pipe(Effect.forkScoped)

    const transport = yield* Transport
    const received = transport.inbound.pipe(
      Stream.runForEach(dispatcher.dispatch),
      Effect.match({
        onFailure: (error): ConnectionEnd => ({ _tag: "TransportEnded", error }),
        onSuccess: (): ConnectionEnd => ({ _tag: "TransportEnded", error: new TransportClosed({ reason: "closed_by_peer" }) })
      })
    )
    const end = yield* Effect.raceFirst(received, Deferred.await(drain.drained).pipe(Effect.as<ConnectionEnd>({ _tag: "ShutdownRequested" })))
    yield* Effect.logInfo("connection ending; confirming cleanup").pipe(Effect.annotateLogs({ end: end._tag }))
    return end
  }).pipe(Effect.provideContext(services))
}).pipe(
  Effect.scoped,
  Effect.annotateLogs({ component: "connection", device_id: info.deviceId, connection: info.connectionNumber })
)

export const run: Effect.Effect<
  ConnectionEnd,
  never,
  Transport | ConnectionInfo | StatusBoard | RuntimeProcessServices
> = Effect.flatMap(ConnectionInfo, connection)
