/**
 * Core's side of the daemon benches, in the bench process: the real gateway (`GatewayServer` on 127.0.0.1 with
 * an in-memory credential store) and a Turn driven the way Core drives one (protocol "Preparation and execution
 * order"): subscribe to preparation, `execution_prepare`, wait for `ready`, subscribe to the Run
 * (`subscribeDurable`), `execution_start`, consume Run events until `done`.
 */
import { Data, Deferred, Effect, Layer, Logger, ManagedRuntime, Option, References, Stream } from "effect"
import { randomBytes } from "node:crypto"
import { DeviceCredentials, type DeviceRecord } from "../../src/core/DeviceCredentials.js"
import type { DeviceSession, RunEvent } from "../../src/core/DeviceSession.js"
import { Gateway } from "../../src/core/Gateway.js"
import { GatewayServer, type GatewayServerOptions } from "../../src/core/server/GatewayServer.js"
import { Ids, type Messages } from "../../src/proto/index.js"

/** A bench Turn did not complete: why, in words (never a payload). */
export class TurnFailed extends Data.TaggedError("TurnFailed")<{ readonly reason: string }> {
  override get message() {
    return `bench Turn failed: ${this.reason}`
  }
}

export interface BenchDevice extends DeviceRecord {
  readonly credential: string
}

/** `count` devices with fresh random daemon credentials (bench-only values, never logged). */
export const makeDevices = (prefix: string, count: number): Array<BenchDevice> =>
  Array.from({ length: count }, (_, i) => ({
    deviceId: `${prefix}-${i}`,
    workspaceId: "bench",
    runtimeType: "agent-daemon",
    credential: `awdc_${randomBytes(24).toString("base64url")}`
  }))

export type CoreRuntime = ManagedRuntime.ManagedRuntime<GatewayServer | Gateway, unknown>

export interface Core {
  readonly runtime: CoreRuntime
  readonly baseUrl: string
  readonly dispose: () => Promise<void>
}

/** Starts the gateway on 127.0.0.1 (a free port) with the given devices. */
export const startCore = async (
  devices: ReadonlyArray<BenchDevice>,
  options: Partial<Omit<GatewayServerOptions, "host" | "port">> = {}
): Promise<Core> => {
  const layer = GatewayServer.layer({ host: "127.0.0.1", port: 0, ...options }).pipe(
    Layer.provide(DeviceCredentials.layerMemory({ devices })),
    // Core's own log lines go to stderr, warnings and above only (the table owns stdout).
    Layer.provide(Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])),
    Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
  )
  const runtime = ManagedRuntime.make(layer) as unknown as CoreRuntime
  const server = await runtime.runPromise(GatewayServer.useSync((server) => server))
  return { runtime, baseUrl: server.baseUrl, dispose: () => runtime.dispose() }
}

/**
 * Resolves with the `performance.now()` of the first valid heartbeat of `deviceId` (the subscription is in place
 * when `ready` resolves, so start the daemon after it).
 */
export const watchDeclared = (core: Core, deviceId: string) => {
  let readyResolve!: () => void
  const ready = new Promise<void>((resolve) => (readyResolve = resolve))
  const declared = core.runtime.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const gateway = yield* Gateway
        const events = yield* gateway.events
        yield* Effect.sync(readyResolve)
        const first = yield* events.pipe(
          Stream.filter((e) => e._tag === "Declared" && e.deviceId === deviceId),
          Stream.map(() => performance.now()),
          Stream.runHead
        )
        return Option.getOrThrow(first)
      })
    )
  )
  return { ready, declared }
}

/** The device's current session (it must be connected). */
export const sessionOf = (core: Core, deviceId: string): Promise<DeviceSession> =>
  core.runtime.runPromise(
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const session = yield* gateway.session(Ids.unsafeMake.deviceId(deviceId))
      return Option.getOrThrowWith(session, () => new Error(`device ${deviceId} is not connected`))
    })
  )

/** The opt-ins Core sets, for the scripted kinds (which declare every capability). */
export const configurationFor = (agentKind: string, sessionId: string): Messages.MessageOfType<"execution_prepare">["payload"]["configuration"] => ({
  agent_kind: agentKind,
  conversation_id: "",
  run_id: "",
  agent_state_key: `agents-api-${sessionId}`,
  strict_resume: true,
  disable_execution_environment: true,
  execution_controls: { web_search: "disabled", text_verbosity: "medium" },
  observe_tool_observations: true
})

/** `performance.now()` marks of one Turn, taken on Core's side. */
export interface TurnTimes {
  readonly prepareSent: number
  readonly ready: number
  readonly startSent: number
  readonly firstDelta: number
  readonly lastDelta: number
  readonly done: number
  readonly deltas: number
}

let turnCounter = 0

/**
 * Runs one Turn on `session` with the given input text and returns Core-side timings. `onDelta` sees each delta
 * as it reaches the subscriber. Fails when preparation does not reach `ready` or the Run stream ends without
 * `done` (observation lost, subscriber overflow).
 */
export const runTurn = (
  session: DeviceSession,
  options: {
    readonly agentKind: string
    readonly sessionId: string
    readonly text: string
    readonly onDelta?: (delta: Extract<RunEvent, { type: "delta" }>, at: number) => void
  }
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const n = ++turnCounter
      const prepId = Ids.unsafeMake.preparationRequestId(`prep-${process.pid}-${n}`)
      const runId = Ids.unsafeMake.runId(`run-${process.pid}-${n}`)
      const statuses = yield* session.subscribePreparation(prepId)
      const readyStatus = yield* Deferred.make<Messages.MessageOfType<"preparation_status">["payload"], TurnFailed>()
      yield* statuses.pipe(
        Stream.runForEach((status) =>
          status.state === "ready"
            ? Deferred.succeed(readyStatus, status)
            : status.state === "rejected" || status.state === "failed" || status.state === "expired" || status.state === "released"
            ? Deferred.fail(readyStatus, new TurnFailed({ reason: `preparation ${status.state} (${status.error_code ?? "no code"})` }))
            : Effect.void
        ),
        Effect.catch((e) => Deferred.fail(readyStatus, new TurnFailed({ reason: `preparation observation ended: ${e._tag}` }))),
        Effect.forkScoped
      )
      const prepareSent = performance.now()
      yield* session.send({
        type: "execution_prepare",
        id: prepId,
        payload: {
          session_id: Ids.unsafeMake.sessionId(options.sessionId),
          configuration: configurationFor(options.agentKind, options.sessionId)
        }
      })
      const status = yield* Deferred.await(readyStatus)
      const ready = performance.now()
      if (status.executor_id === undefined || status.handle === undefined) return yield* new TurnFailed({ reason: "ready without executor or handle" })
      const events = yield* session.subscribeDurable(runId)
      const startSent = performance.now()
      yield* session.send({
        type: "execution_start",
        id: prepId,
        payload: {
          executor_id: status.executor_id,
          handle: status.handle,
          run_id: runId,
          input: [{ content: [{ type: "input_text", text: options.text }] }]
        }
      })
      let firstDelta = 0
      let lastDelta = 0
      let deltas = 0
      let done = 0
      // The Run's events as the gateway hands them over: each socket read's events as one array (one Effect per
      // read, not per event; docs/gateway.md "Run subscriptions").
      yield* events.pipe(
        Stream.runForEachArray((batch) =>
          Effect.sync(() => {
            for (const event of batch) {
              const at = performance.now()
              if (event.type === "delta") {
                if (deltas === 0) firstDelta = at
                lastDelta = at
                deltas++
                options.onDelta?.(event, at)
              } else if (event.type === "done") done = at
            }
          })
        )
      )
      if (done === 0) return yield* new TurnFailed({ reason: "the Run stream ended without done" })
      return { prepareSent, ready, startSent, firstDelta, lastDelta, done, deltas } satisfies TurnTimes
    })
  )
