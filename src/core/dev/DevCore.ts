/**
 * The standalone dev Core (docs/dev-core.md): one HTTP server (platform-node) carrying the gateway's machine
 * routes (`/api/v1/agent-daemon/…`) and the operator API (`/api/v1/operator/…`, OperatorApi.ts), over the
 * store: by default SQLite in the data directory, or PostgreSQL when `database` is given (docs/store.md,
 * docs/multi-node.md).
 *
 * Start order: open and migrate the store, bind the server (port 0 picks a free port), derive the gateway's
 * public URL from the bound address (unless one is given), reconcile Turns a previous process left
 * unfinished (Recovery.ts; with PostgreSQL, only those no live node owns), then serve. Stop order: end every Runtime connection (`gateway_shutdown`) so running Turns
 * record their outcome, wait for that (bounded), close the server, close the store.
 *
 * The operator token never authenticates a machine route: those accept daemon credentials only, checked
 * against stored device digests, and the token is never stored there.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, type Redacted } from "effect"
import { HttpRouter, HttpServer, type HttpServerError } from "effect/http"
import type { SqlClient } from "effect/sql"
import { Gateway } from "../Gateway.js"
import { GatewayConfig, type GatewayConfigInvalid } from "../GatewayConfig.js"
import * as FrameTap from "../FrameTap.js"
import * as GatewayHttp from "../server/GatewayHttp.js"
import * as DataDirLock from "./DataDirLock.js"
import { DevIds } from "./DevIds.js"
import * as DeviceDirectory from "./DeviceDirectory.js"
import * as Files from "./Files.js"
import * as FilesApi from "./FilesApi.js"
import * as MetricsRoute from "./MetricsRoute.js"
import * as Operator from "./Operator.js"
import * as OperatorApi from "./OperatorApi.js"
import { LeaseKeeper } from "./pg/LeaseKeeper.js"
import * as LeaseSweeper from "./pg/LeaseSweeper.js"
import { JournalFeed } from "./pg/JournalFeed.js"
import { NodeRouter } from "./pg/NodeRouter.js"
import { NodeStreams } from "./pg/NodeStreams.js"
import { OwnerLeases } from "./pg/OwnerLeases.js"
import { recoverUnfinishedTurns } from "./Recovery.js"
import { SessionLocks } from "./SessionLocks.js"
import * as DatabaseSessionLocks from "./pg/DatabaseSessionLocks.js"
import * as WriteReservations from "./WriteReservations.js"
import * as SuspensionApi from "./SuspensionApi.js"
import * as Suspensions from "./Suspensions.js"
import * as Store from "./Store.js"
import type { StoreFailed } from "./StoreErrors.js"
import * as TurnJournal from "./TurnJournal.js"
import * as ConsoleRoutes from "./console/ConsoleRoutes.js"
import type { TurnStore } from "./TurnStore.js"
import * as Initialization from "./Initialization.js"
import * as McpSecrets from "./McpSecrets.js"
import * as InitializationStore from "./InitializationStore.js"
import * as Turns from "./Turns.js"
import { DevCoreContextDepth, withContextDepth } from "../internal/contextDepth.js"

export interface DevCoreOptions {
  /** Listen address (default 127.0.0.1). */
  readonly host?: string
  /** Listen port; 0 picks a free one (default 0). */
  readonly port?: number
  readonly dataDir: string
  /**
   * A PostgreSQL database URL (`postgres://…`): the store lives there instead of the data directory's
   * SQLite file. Kept redacted; only `Store.describeLocation` (no password) is ever shown.
   */
  readonly database?: Redacted.Redacted<string>
  /**
   * SQLite durability (docs/store.md "Durability"): `full` (default) fsyncs every commit, `normal` does not.
   * PostgreSQL commits follow the server's own `synchronous_commit`.
   */
  readonly durability?: Store.Durability
  /**
   * This node's id among several Core nodes on one database (default: its public URL, which other nodes
   * and operators reach it at). Owner leases are kept only with a `database`.
   */
  readonly nodeId?: string
  /** Owner lease TTL in milliseconds (default 15 s; renewed every third of it). */
  readonly leaseTtlMs?: number
  /** The operator API's bearer token (the "Core key"). */
  readonly operatorToken: Redacted.Redacted<string>
  /** Public base URL daemons are told to dial; default: the bound address. */
  readonly publicUrl?: string
  /** Heartbeat cadence bootstrap returns (default 15 s). */
  readonly heartbeatSeconds?: number
  /** Observes every frame the gateway sends or receives (the demo's live view). */
  readonly tap?: (frame: FrameTap.TappedFrame) => Effect.Effect<void>
  readonly turns?: Turns.TurnsOptions
  /** Session initialization tunables (tests shorten them). */
  readonly initialization?: Initialization.InitializationOptions
  /** Ids (tests use `DevIds.layerTest`). */
  readonly ids?: Layer.Layer<DevIds>
}

/** Why the dev Core could not start (nothing is listening): the store, the reconciliation, the listen or the URL. */
export type DevCoreStartError =
  | DataDirLock.DataDirLocked
  | DataDirLock.DataDirLockFailed
  | Store.StoreOpenFailed
  | StoreFailed
  | HttpServerError.ServeError
  | GatewayConfigInvalid

/** One line for an operator: why the dev Core did not start (a listen failure names the address and the code). */
export const startErrorMessage = (error: DevCoreStartError, host: string, port: number): string => {
  if (error._tag !== "ServeError") return error.message
  const cause = error.cause as { readonly code?: unknown; readonly message?: unknown } | undefined
  const code = typeof cause?.code === "string" ? cause.code : typeof cause?.message === "string" ? cause.message : "unknown"
  return `cannot listen on ${host}:${port} (${code === "EADDRINUSE" ? "EADDRINUSE: the port is already in use" : code})`
}

export class DevCore extends Context.Service<DevCore, {
  /** The base URL the server listens on, e.g. `http://127.0.0.1:41234`. */
  readonly url: string
  readonly port: number
  readonly dataDir: string
  /** Where the store is, as it may be printed (a file path, or the database URL without its password). */
  readonly store: string
  /** The URL daemons should use for `--core-url`. */
  readonly publicUrl: string
}>()("agentwire/core/dev/DevCore") {}

/** Every service the dev Core layer provides (the demo drives Turns in-process through them). */
export type DevCoreServices =
  | DevCore
  | Operator.Operator
  | Turns.Turns
  | Files.Files
  | DeviceDirectory.DeviceDirectory
  | McpSecrets.McpSecrets
  | Gateway
  | Store.StoreServices

/** The dev Core as a layer: listening once built, stopped (in the order above) when its scope closes. */
export const layer = (options: DevCoreOptions): Layer.Layer<DevCoreServices, DevCoreStartError> => {
  const host = options.host ?? "127.0.0.1"
  const ids = options.ids ?? DevIds.layer

  // The data-directory lock comes first: a second Core fails here, before the store is opened or reconciled.
  const lock = Layer.effectDiscard(
    Store.ensureDataDir(options.dataDir).pipe(Effect.andThen(DataDirLock.acquire(options.dataDir)))
  )
  const location: Store.StoreLocation = options.database === undefined
    ? { _tag: "sqlite", dataDir: options.dataDir, ...(options.durability === undefined ? {} : { durability: options.durability }) }
    : { _tag: "postgres", url: options.database }
  const store = Store.layer(location).pipe(Layer.provideMerge(ids), Layer.provide(lock))

  const server = NodeHttpServer.layer(() => GatewayHttp.createGuardedServer(), {
    host,
    port: options.port ?? 0,
    websocket: GatewayHttp.websocketServerOptions,
    gracefulShutdownTimeout: Duration.seconds(2)
  })

  const gatewayConfig = Layer.unwrap(
    Effect.map(HttpServer.HttpServer, (s: HttpServer.HttpServer["Service"]) =>
      GatewayConfig.layer({
        publicUrl: options.publicUrl ?? HttpServer.formatAddress(s.address),
        ...(options.heartbeatSeconds === undefined ? {} : { heartbeatSeconds: options.heartbeatSeconds })
      }))
  )

  // Owner leases (docs/multi-node.md), with a PostgreSQL store only: the node is known once the server is
  // bound. Recovery reads them (Turns a live node owns stay its own); the keeper claims and renews them for
  // this node's connections; the device views report them (both find them in the context when present).
  const ownerLeases = Layer.unwrap(
    Effect.map(GatewayConfig, (config) =>
      OwnerLeases.layer({
        nodeId: options.nodeId ?? config.publicUrl,
        nodeUrl: config.publicUrl,
        ...(options.leaseTtlMs === undefined ? {} : { ttlMs: options.leaseTtlMs })
      }))
  )
  const recovery: Layer.Layer<never, StoreFailed, TurnStore | SqlClient.SqlClient | GatewayConfig> = options.database === undefined
    ? Layer.effectDiscard(recoverUnfinishedTurns)
    : Layer.effectDiscard(recoverUnfinishedTurns).pipe(Layer.provideMerge(ownerLeases))
  // The keeper also claims at the upgrade (OwnerClaim) and answers device-status's owner; the sweeper
  // reconciles the Turns of owners whose lease was lost (pg/LeaseSweeper.ts). Turn writes are fenced on the
  // keeper's leases (TurnFence.ts).
  const leaseKeeper: Layer.Layer<never, never, Gateway | SqlClient.SqlClient | GatewayConfig | TurnStore> =
    options.database === undefined
      ? Layer.empty
      : Layer.mergeAll(LeaseKeeper.layer, LeaseSweeper.layer()).pipe(Layer.provideMerge(ownerLeases))

  const gateway = Gateway.layer.pipe(
    Layer.provide(options.tap === undefined ? Layer.empty : FrameTap.layer(options.tap))
  )

  // Write reservations a previous process left unsettled are reconciled at start. With PostgreSQL the owner
  // leases are in the context: a row whose device another live node owns is left alone (it may be mid-write).
  const recoverWrites = Layer.effectDiscard(Effect.flatMap(WriteReservations.WriteReservations, (w) => w.recover))
  const writeReservations = options.database === undefined
    ? recoverWrites.pipe(Layer.provideMerge(WriteReservations.layer))
    : recoverWrites.pipe(Layer.provide(ownerLeases), Layer.provideMerge(WriteReservations.layer))
  // Suspension requests a previous process left in flight become unknown (never replayed); single node only.
  const suspensions = options.database === undefined
    ? Layer.effectDiscard(Effect.flatMap(Suspensions.Suspensions, (s) => s.recover)).pipe(
      Layer.provideMerge(Suspensions.layer)
    )
    : Suspensions.layer
  // Routing between nodes (docs/multi-node.md "Routing"), with a PostgreSQL store only: request rows plus
  // LISTEN/NOTIFY on the store's own pool (the PostgreSQL store's layer carries its PgClient).
  const storePgClient = Layer.effect(
    PgClient.PgClient,
    Effect.flatMap(Effect.serviceOption(PgClient.PgClient), Option.match({
      onNone: () => Effect.die(new Error("a PostgreSQL store without its PgClient")),
      onSome: Effect.succeed
    }))
  )
  const nodeRouter: Layer.Layer<never, StoreFailed, SqlClient.SqlClient | GatewayConfig | DevIds | TurnStore> =
    options.database === undefined
      ? Layer.empty
      : Layer.mergeAll(
        NodeStreams.layer().pipe(
          Layer.provideMerge(Layer.unwrap(Effect.map(GatewayConfig, (config) => NodeRouter.layer({ nodeId: options.nodeId ?? config.publicUrl }))))
        ),
        JournalFeed.layer()
      ).pipe(Layer.provide(storePgClient))
  const services = Layer.mergeAll(
    Operator.layer,
    Turns.layer(options.turns ?? {}),
    Files.layer
  ).pipe(
    Layer.provideMerge(DeviceDirectory.layer),
    Layer.provideMerge(TurnJournal.layer),
    // Several nodes (PostgreSQL): the Session lock is also a database lock (pg/DatabaseSessionLocks.ts).
    Layer.provideMerge(options.database === undefined ? SessionLocks.layer : DatabaseSessionLocks.layer()),
    Layer.provideMerge(writeReservations),
    Layer.provideMerge(suspensions),
    Layer.provideMerge(Initialization.layer(options.initialization ?? {}).pipe(Layer.provideMerge(InitializationStore.layer))),
    Layer.provideMerge(McpSecrets.layer(options.dataDir)),
    Layer.provideMerge(nodeRouter)
  )

  const routes = Layer.mergeAll(
    GatewayHttp.layer,
    OperatorApi.layer(options.operatorToken),
    FilesApi.layer(options.operatorToken),
    MetricsRoute.layer(options.operatorToken),
    SuspensionApi.layer(options.operatorToken),
    ConsoleRoutes.layer
  )

  // Path parameters up to 16 KiB reach the routes, so an over-long id is answered 400 by its route (never an
  // empty 404 from the router's default 100-character bound).
  const serve = HttpRouter.serve(routes, {
    disableLogger: true,
    disableListenLog: true,
    routerConfig: { maxParamLength: OperatorApi.MaxPathParamChars }
  })

  const devCore = Layer.effect(
    DevCore,
    Effect.gen(function* () {
      const s = yield* HttpServer.HttpServer
      const config = yield* GatewayConfig
      const url = HttpServer.formatAddress(s.address)
      const port = s.address._tag === "UnixPathAddress" ? 0 : s.address.port
      // For `agentwire core credential revoke` next to this Core (removed when the lock is released).
      yield* DataDirLock.writeAddress(options.dataDir, { url, pid: process.pid }).pipe(Effect.ignore)
      return DevCore.of({
        url,
        port,
        dataDir: options.dataDir,
        store: Store.describeLocation(location),
        publicUrl: config.publicUrl
      })
    })
  )

  // The shutdown hook is built last, so it runs first: end connections and let Turns record before the
  // server's graceful close waits for them.
  const shutdownFirst = Layer.effectDiscard(
    Effect.gen(function* () {
      const turns = yield* Turns.Turns
      yield* Effect.addFinalizer(() => turns.shutdown)
    })
  )

  return Layer.mergeAll(devCore, serve, shutdownFirst).pipe(
    Layer.provideMerge(services),
    Layer.provideMerge(leaseKeeper),
    Layer.provideMerge(gateway),
    Layer.provideMerge(recovery),
    Layer.provideMerge(gatewayConfig),
    Layer.provideMerge(server),
    Layer.provideMerge(store),
    // Its request and Turn fibers stack more services than Effect's default chain before a copy (contextDepth.ts).
    withContextDepth(DevCoreContextDepth)
  )
}
