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
import { Deferred, Effect, FiberSet, Stream } from "effect"
import type { RuntimeView } from "./StatusBoard.js"
import * as Admission from "./Admission.js"
import * as DirectRuns from "./DirectRuns.js"
import * as Dispatcher from "./Dispatcher.js"
import * as Executors from "./Executors.js"
import * as Functions from "./Functions.js"
import { HarnessRegistry, kindStatus } from "./harness/HarnessRegistry.js"
import * as Heartbeat from "./Heartbeat.js"
import * as Interactions from "./Interactions.js"
import * as Outbound from "./Outbound.js"
import { Ownership } from "./Ownership.js"
import { RuntimeIds } from "./RuntimeIds.js"
import type { RuntimeProcessServices } from "./RuntimeProcess.js"
import * as Runs from "./Runs.js"
import { StatusBoard } from "./StatusBoard.js"
import * as Steering from "./Steering.js"
import { ConnectionInfo, Transport, TransportClosed } from "./transport/Transport.js"

/** How a connection ended. Returned only after its cleanup confirmed. */
export type ConnectionEnd =
  | { readonly _tag: "TransportEnded"; readonly error: TransportClosed }
  | { readonly _tag: "ShutdownRequested" } // device_shutdown: drained and cleaned up; the daemon exits 0

const emptyView: RuntimeView = { active_runs: 0, admissions: [], executors: [], runs: [], unconfirmed: [] }

const connection = (info: ConnectionInfo["Service"]) => Effect.gen(function* () {
  const transport = yield* Transport
  const board = yield* StatusBoard
  const registry = yield* HarnessRegistry
  const ownership = yield* Ownership
  const ids = yield* RuntimeIds
  const daemonVersion = (yield* board.snapshot).daemon_version
  const outbound = Outbound.make(transport)

  // Finalizers run in reverse order of registration. The view stays attached until the very end (also
  // while cleanup is being confirmed); Executors are closed after Runs and preparations stopped.
  let view: Effect.Effect<RuntimeView> = Effect.succeed(emptyView)
  yield* board.attachView(Effect.suspend(() => view))
  yield* board.setKinds((yield* registry.declarations).map(kindStatus))
  const executors = yield* Executors.makeWith({ onChange: board.touch })
  yield* Effect.addFinalizer(() => executors.closeAll)
  const background = yield* FiberSet.make<unknown, unknown>()

  let shuttingDown = false
  const drained = yield* Deferred.make<void>()
  const applied = Interactions.makeAppliedStore()
  const interactions = Interactions.make({ outbound, applied, background })
  // Steering and Functions need Runs, and Runs needs their hooks: the hooks close over the later values.
  let steering: Steering.Steering | undefined
  let functions: Functions.Functions | undefined
  const runs = yield* Runs.make({
    outbound,
    executors,
    background,
    onChange: board.touch,
    hooks: {
      onEmit: (run, event) =>
        Effect.andThen(interactions.onEmit(run, event), functions === undefined ? Effect.void : functions.onEmit(run, event)),
      beforeDone: (run) => (steering === undefined ? Effect.void : steering.beforeDone(run)),
      onEnd: (run) => Effect.andThen(interactions.onEnd(run), steering === undefined ? Effect.void : steering.onEnd(run))
    }
  })
  steering = Steering.make({ outbound, runs, background })
  functions = Functions.make({ outbound, runs, applied, background })
  const admission = yield* Admission.make({
    outbound,
    executors,
    runs,
    registry,
    ids,
    ownership,
    background,
    shuttingDown: () => shuttingDown,
    onChange: board.touch
  })
  const direct = DirectRuns.make({ outbound, runs, executors, registry, ids, background, shuttingDown: () => shuttingDown })

  /** device_shutdown: stop Runs locally, stop preparations, close every Executor until confirmed. No reply. */
  const shutdown = (reason: string | undefined) =>
    Effect.gen(function* () {
      if (shuttingDown) return
      shuttingDown = true
      yield* Effect.logInfo("device_shutdown: draining").pipe(Effect.annotateLogs({ reason_bytes: reason?.length ?? 0 }))
      yield* FiberSet.run(
        background,
        Effect.gen(function* () {
          yield* runs.stopAll
          yield* admission.shutdown
          yield* executors.closeAll
          yield* Deferred.succeed(drained, undefined)
        })
      )
    })

  const dispatcher = Dispatcher.make({
    outbound,
    admission,
    runs,
    direct,
    steering,
    interactions,
    functions,
    background,
    shutdown
  })

  view = Effect.gen(function* () {
    return {
      active_runs: yield* runs.activeCount,
      admissions: yield* admission.view,
      executors: yield* executors.view,
      runs: yield* runs.view,
      unconfirmed: yield* ownership.unconfirmed
    }
  })
  yield* board.touch // the attached view now reports this connection's state

  yield* Heartbeat.run({
    outbound,
    registry,
    activeRequests: runs.activeCount,
    daemonVersion,
    interval: info.heartbeatInterval
  }).pipe(Effect.forkScoped)

  const received = transport.inbound.pipe(
    Stream.runForEach(dispatcher.dispatch),
    Effect.match({
      onFailure: (error): ConnectionEnd => ({ _tag: "TransportEnded", error }),
      onSuccess: (): ConnectionEnd => ({ _tag: "TransportEnded", error: new TransportClosed({ reason: "closed_by_peer" }) })
    })
  )
  const end = yield* Effect.raceFirst(received, Deferred.await(drained).pipe(Effect.as<ConnectionEnd>({ _tag: "ShutdownRequested" })))
  yield* Effect.logInfo("connection ending; confirming cleanup").pipe(Effect.annotateLogs({ end: end._tag }))
  return end
}).pipe(
  Effect.scoped,
  Effect.annotateLogs({ component: "connection", device_id: info.deviceId, connection: info.connectionNumber })
)

export const run: Effect.Effect<
  ConnectionEnd,
  never,
  Transport | ConnectionInfo | StatusBoard | RuntimeProcessServices
> = Effect.flatMap(ConnectionInfo, connection)
