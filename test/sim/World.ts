/**
 * The simulated world of one schedule: the real dev Core (gateway, Turns, journal, recovery) over a store that
 * outlives Core restarts, and the real daemon (`Daemon.run` with its per-connection `Connection.run`, Admission,
 * Executors, Runs, … and the `scripted` harness behind the native ledger), connected by in-memory links. Both
 * run in this process on the caller's TestClock. Core and the daemon can each be stopped and started again: a
 * Core restart closes Core's scope (connections end with `gateway_shutdown`, Turns record what they can) and
 * builds a new Core over the same store, which reconciles unfinished Turns; a daemon stop interrupts its fiber
 * (what SIGTERM does) and waits for its confirmed cleanup.
 */
import { Context, Duration, Effect, Exit, Fiber, Layer, Option, Redacted, Scope } from "effect"
import { DevIds, type IdKind } from "../../src/core/dev/DevIds.js"
import * as Files from "../../src/core/dev/Files.js"
import * as Initialization from "../../src/core/dev/Initialization.js"
import * as InitializationStore from "../../src/core/dev/InitializationStore.js"
import { SessionLocks } from "../../src/core/dev/SessionLocks.js"
import * as WriteReservations from "../../src/core/dev/WriteReservations.js"
import { DeviceStore } from "../../src/core/dev/DeviceStore.js"
import { recoverUnfinishedTurns } from "../../src/core/dev/Recovery.js"
import * as Store from "../../src/core/dev/Store.js"
import * as TurnJournal from "../../src/core/dev/TurnJournal.js"
import * as Turns from "../../src/core/dev/Turns.js"
import { Gateway } from "../../src/core/Gateway.js"
import { GatewayConfig } from "../../src/core/GatewayConfig.js"
import { fromSocket } from "../../src/core/transport/internal/socket.js"
import { Ids, Version } from "../../src/proto/index.js"
import * as Daemon from "../../src/runtime/Daemon.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import { HarnessRegistry } from "../../src/runtime/harness/HarnessRegistry.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { ConnectFailed } from "../../src/runtime/transport/ConnectError.js"
import { Connector } from "../../src/runtime/transport/Connector.js"
import * as MemoryLink from "./MemoryLink.js"
import { memoryFs, type WorkspaceLedger, WorkspaceRoot } from "./MemoryWorkspace.js"
import { aliveExecutors, type Broken, type NativeLedger, observe } from "./NativeLedger.js"
import type { Prng } from "./Prng.js"

export const DeviceId = "dev-1"
/** The daemon's active bound in the simulation (small, so capacity is contended). */
export const MaxActive = 2
/**
 * How long the daemon keeps an idle Executor (production: 10 minutes). Shorter here, so a workspace write or
 * transfer — refused while any Executor is retained — meets an idle daemon within a schedule.
 */
export const IdleExecutorTtlMs = 60_000
/** The device's Environment (a canonical UUID, as Core requires), bound on the daemon at `WorkspaceRoot`. */
export const EnvironmentId = "00000000-0000-4000-8000-00000000e001"
/** The id of the n-th Session when it is self_hosted. */
export const hostedSessionId = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`
export const selfHosted = { type: "self_hosted" as const, id: EnvironmentId, workspace_directory: WorkspaceRoot }

/** Ids that keep counting across Core restarts (a restarted Core must not reuse a stored id). */
const simIds = (counters: Map<IdKind, number>) =>
  Layer.succeed(DevIds, DevIds.of({
    next: (kind) =>
      Effect.sync(() => {
        const n = (counters.get(kind) ?? 0) + 1
        counters.set(kind, n)
        return `${kind}-${n}`
      })
  }))

type StoreContext = Context.Context<Store.StoreServices | DevIds>
type CoreServices = Turns.Turns | Files.Files | Gateway | GatewayConfig

interface CoreGeneration {
  readonly generation: number
  readonly scope: Scope.Closeable
  /**
   * Where operator actions run: closed after the generation's connections (as production's HTTP handlers end
   * after its Runtime connections), so an operation waiting on the Runtime — an uninterruptible write — meets
   * the connection's end instead of holding the shutdown.
   */
  readonly operators: Scope.Closeable
  readonly turns: Turns.Turns["Service"]
  readonly files: Files.Files["Service"]
  readonly gateway: Gateway["Service"]
  readonly config: GatewayConfig["Service"]
}

interface DaemonProcess {
  readonly proc: number
  readonly scope: Scope.Closeable
  readonly signals: ScriptedSignals["Service"]
  readonly fiber: Fiber.Fiber<void, Daemon.DaemonRejected>
}

export interface WorldHooks {
  readonly trace: (line: string) => void
  readonly frame: (event: MemoryLink.FrameEvent, proc: number) => void
  /** Called when a daemon process ended, with the native Executors it left alive (must be none). */
  readonly processExited: (proc: number, alive: ReadonlyArray<string>) => void
}

export const make = (options: {
  readonly ledger: NativeLedger
  readonly workspace: WorkspaceLedger
  readonly broken: Broken
  readonly rng: Prng
  readonly hooks: WorldHooks
  /** Drives time while waiting for a stop (Core shutdown, daemon cleanup). */
  readonly advance: (ms: number) => Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    const { hooks, ledger, rng } = options
    const worldScope = yield* Effect.scope
    const counters = new Map<IdKind, number>()
    // The in-thread store: replies from a worker thread would make the schedule depend on another thread.
    const storeContext: StoreContext = yield* Layer.build(Store.layerFile(":memory:", undefined, "in-thread").pipe(Layer.provideMerge(simIds(counters)))).pipe(Effect.orDie)
    const credential = yield* Effect.provideContext(
      Effect.flatMap(Effect.service(DeviceStore), (devices) => devices.issueCredential(DeviceId)),
      storeContext
    ).pipe(Effect.orDie)
    const device = { deviceId: DeviceId, workspaceId: "ws-1", runtimeType: "agent-daemon" as const }

    let core: CoreGeneration | undefined
    let generations = 0
    let daemon: DaemonProcess | undefined
    let procs = 0
    let connections = 0
    let current: MemoryLink.MemoryLink | undefined
    let stormLeft = 0
    /** The broken build `replayWriteAfterReconnect`: the last workspace_write frame Core sent, to send again. */
    let replayable: string | undefined

    // The dev Core's services as DevCore.ts wires them for SQLite: Turns and Files over the Session locks, the
    // write reservations (unsettled ones reconciled at start, as a restarted production Core does) and Session
    // initialization.
    const recoverWrites = Layer.effectDiscard(Effect.orDie(Effect.flatMap(WriteReservations.WriteReservations, (w) => w.recover)))
    const initialization = Initialization.layer({}).pipe(Layer.provideMerge(InitializationStore.layer))
    const coreLayer = Layer.mergeAll(Turns.layer({}), Files.layer).pipe(
      Layer.provideMerge(TurnJournal.layer),
      Layer.provideMerge(SessionLocks.layer),
      Layer.provideMerge(recoverWrites.pipe(Layer.provideMerge(WriteReservations.layer))),
      Layer.provideMerge(initialization),
      Layer.provideMerge(Layer.effectDiscard(Effect.orDie(recoverUnfinishedTurns))),
      Layer.provideMerge(Gateway.layer),
      Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.sim" })),
      Layer.provideMerge(Layer.succeedContext(storeContext))
    ) as Layer.Layer<CoreServices | Store.StoreServices, never>
    /** Stores a Session's initialization (the operator's create; only the store is involved). */
    const initStore = yield* Layer.build(initialization.pipe(Layer.provide(Layer.succeedContext(storeContext))))
    const sessionInitialization = Context.get(initStore, Initialization.SessionInitialization)
    const initializationStore = Context.get(initStore, InitializationStore.InitializationStore)

    const startCore = Effect.gen(function* () {
      if (core !== undefined) return
      const scope = yield* Scope.fork(worldScope)
      const context = yield* Layer.buildWithScope(coreLayer, scope).pipe(Effect.orDie)
      const operators = yield* Scope.fork(scope)
      generations++
      core = {
        generation: generations,
        scope,
        operators,
        turns: Context.get(context, Turns.Turns),
        files: Context.get(context, Files.Files),
        gateway: Context.get(context, Gateway),
        config: Context.get(context, GatewayConfig)
      }
      hooks.trace(`core generation ${generations} started`)
    })

    /** Runs `stop` in the background and drives the clock until it finished (bounded). */
    const driveUntilDone = (stop: Effect.Effect<void>, what: string) =>
      Effect.gen(function* () {
        const fiber = yield* Effect.forkIn(stop, worldScope)
        for (let i = 0; i < 100 && fiber.pollUnsafe() === undefined; i++) yield* options.advance(1_000)
        if (fiber.pollUnsafe() === undefined) hooks.trace(`${what} did not finish within 100 s`)
        return fiber.pollUnsafe() !== undefined
      })

    const stopCore = Effect.gen(function* () {
      const c = core
      if (c === undefined) return
      core = undefined
      yield* driveUntilDone(Scope.close(c.scope, Exit.void), `core generation ${c.generation} shutdown`)
      hooks.trace(`core generation ${c.generation} stopped`)
    })

    const connector = (proc: number) =>
      Connector.of({
        connect: Effect.gen(function* () {
          const c = core
          if (c === undefined) {
            hooks.trace(`process ${proc}: connect refused (core down)`)
            return yield* new ConnectFailed({ phase: "bootstrap", reason: "network", detail: "ECONNREFUSED" })
          }
          const n = ++connections
          const link = yield* MemoryLink.make({
            connection: n,
            observe: (event) => {
              if (event.direction === "toRuntime" && event.delivered && event.text.includes(`"type":"workspace_write"`)) {
                replayable = event.connection === n ? event.text : replayable
              }
              hooks.frame(event, proc)
            },
            onEnd: (by, code) => hooks.trace(`c${n} ended by ${by} (${code})`)
          })
          current = link
          if (stormLeft > 0) {
            stormLeft--
            link.dropAtFrame(rng.between(1, 3), rng.chance(0.5))
          }
          yield* Effect.addFinalizer(() => link.transport.close(1000, "connection scope closed"))
          yield* Effect.forkIn(
            Effect.scoped(
              Effect.flatMap(
                fromSocket(link.socket, { capacity: c.config.sendQueueCapacity, writeDeadline: c.config.writeDeadline }),
                (transport) => c.gateway.accept(device, transport)
              )
            ).pipe(Effect.ignore),
            c.scope
          )
          hooks.trace(`c${n} connected (process ${proc}, core generation ${c.generation})`)
          if (options.broken === "replayWriteAfterReconnect" && replayable !== undefined) {
            link.inject(replayable)
            replayable = undefined
          }
          return { transport: link.transport, heartbeatInterval: Duration.seconds(15), coreVersion: Version.ProtocolVersion }
        })
      })

    /** The daemon's own process layer, its harness registry wrapped so every Harness reports to the ledger. */
    const processLayer = (proc: number) =>
      Layer.effect(
        HarnessRegistry,
        Effect.map(Effect.service(HarnessRegistry), (registry) =>
          HarnessRegistry.of({
            ...registry,
            get: (kind) => Effect.map(registry.get(kind), Option.map((h) => observe(h, ledger, proc, options.broken)))
          }))
      ).pipe(Layer.provideMerge(RuntimeProcess.layer({
        maxActive: MaxActive,
        ids: "sequential",
        idleExecutorTtl: Duration.millis(IdleExecutorTtlMs),
        environment: { environmentId: EnvironmentId, root: WorkspaceRoot, configured: WorkspaceRoot, networkAccess: "disabled" },
        wrapWorkspaceFs: () => memoryFs(options.workspace)
      })))

    const startDaemon = Effect.gen(function* () {
      if (daemon !== undefined) return
      const proc = ++procs
      const scope = yield* Scope.fork(worldScope)
      const context = yield* Layer.buildWithScope(processLayer(proc), scope)
      const board = yield* StatusBoard.make({ daemonVersion: "sim", wireVersion: Version.ProtocolVersion, pid: proc, deviceId: DeviceId, coreUrl: "http://core.sim" })
      const fiber = yield* Daemon.run({ deviceId: Ids.unsafeMake.deviceId(DeviceId), coreOrigin: "http://core.sim" }).pipe(
        Effect.provideContext(context),
        Effect.provideService(Connector, connector(proc)),
        Effect.provideService(StatusBoard, board),
        Effect.onExit((exit) =>
          Effect.sync(() => {
            hooks.trace(`process ${proc} exited (${Exit.isSuccess(exit) ? "success" : Exit.hasInterrupts(exit) ? "interrupted" : "failure"})`)
            hooks.processExited(proc, aliveExecutors(ledger, proc))
          })
        ),
        Effect.forkIn(scope)
      )
      daemon = { proc, scope, signals: Context.get(context, ScriptedSignals), fiber }
      hooks.trace(`process ${proc} started`)
    })

    /** SIGTERM: interrupt the daemon (its connection scope confirms every cleanup first) and drop the process. */
    const stopDaemon = Effect.gen(function* () {
      const d = daemon
      if (d === undefined) return
      daemon = undefined
      yield* driveUntilDone(Effect.andThen(Fiber.interrupt(d.fiber), Scope.close(d.scope, Exit.void)), `process ${d.proc} stop`)
    })

    /** A daemon that ended by itself (device_shutdown) is gone; the supervisor starts a new one. */
    const reapDaemon = Effect.gen(function* () {
      const d = daemon
      if (d === undefined || d.fiber.pollUnsafe() === undefined) return false
      daemon = undefined
      yield* Scope.close(d.scope, Exit.void)
      return true
    })

    return {
      credential: Redacted.value(credential),
      storeContext,
      sessionInitialization,
      initializationStore,
      core: () => core,
      daemon: () => daemon,
      link: () => (current !== undefined && current.isOpen() ? current : undefined),
      startCore,
      stopCore,
      startDaemon,
      stopDaemon,
      reapDaemon,
      storm: (drops: number) => {
        stormLeft = drops - 1
        current?.drop()
      }
    }
  })

export type World = Effect.Success<ReturnType<typeof make>>
