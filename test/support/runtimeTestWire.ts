/**
 * Helpers for the Runtime's per-connection tests: a process layer with deterministic ids and a status board,
 * a connection under test over the in-memory transport (test/support/runtimeMemoryTransport.ts), frame
 * builders for Core's side, and small assertions. Time only moves with TestClock.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import type { Messages } from "../../src/proto/index.js"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import * as Connection from "../../src/runtime/Connection.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { ConnectionInfo, Transport } from "../../src/runtime/transport/Transport.js"
import { MemoryTransport } from "./runtimeMemoryTransport.js"

export const SessionId = "b0a4c7e2-6d1f-4a53-9a7e-1f2d3c4b5a69"

/** Process services (sequential ids) plus a status board. */
export const processLayer = (options: RuntimeProcess.RuntimeProcessOptions = {}) =>
  Layer.mergeAll(
    RuntimeProcess.layer({ ids: "sequential", ...options }),
    StatusBoard.layer({ daemonVersion: "9.9.9-test", wireVersion: "0.10.0", pid: 1, deviceId: "device-1", coreUrl: "http://core.test" })
  )

export type ConnectionUnderTest = Effect.Success<ReturnType<typeof connect>>

/**
 * Starts `Connection.run` over a fresh in-memory transport and takes the first heartbeat. The heartbeat
 * interval defaults to an hour so heartbeats do not interleave with the frames a test expects.
 *
 * The connection runs in the enclosing Scope, as the daemon runs it (Daemon.ts): when that Scope closes, the
 * connection is interrupted and returns only after every Executor it owns closed until confirmed (processes
 * reaped), and that happens before the Scope's earlier releases (a state directory, a fake server) run. A
 * child fiber of the test would instead outlive the Scope and be interrupted only when the test's fiber ends,
 * after those releases: a native process still writing into a directory being removed (ENOTEMPTY).
 */
export const connect = (options: { readonly heartbeatInterval?: Duration.Input; readonly connectionNumber?: number } = {}) =>
  Effect.gen(function* () {
    const core = yield* MemoryTransport.make
    const fiber = yield* Connection.run.pipe(
      Effect.provideService(Transport, core.transport),
      Effect.provideService(ConnectionInfo, ConnectionInfo.of({
        deviceId: unsafeMake.deviceId("device-1"),
        connectionNumber: options.connectionNumber ?? 1,
        heartbeatInterval: Duration.fromInputUnsafe(options.heartbeatInterval ?? "1 hour")
      })),
      Effect.forkScoped
    )
    const heartbeat = yield* core.fromRuntime
    return { core, fiber, heartbeat }
  })

/** Lets every runnable fiber proceed (no time passes). */
export const settle = Effect.gen(function* () {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

/** Frames `take` read past while looking for another type, per connection; `next` and `take` read them first. */
const skipped = new WeakMap<MemoryTransport, Array<Messages.RuntimeToCore>>()
const bufferOf = (core: MemoryTransport) => {
  let buffer = skipped.get(core)
  if (buffer === undefined) {
    buffer = []
    skipped.set(core, buffer)
  }
  return buffer
}
const read = (core: MemoryTransport) =>
  Effect.suspend(() => {
    const buffered = bufferOf(core).shift()
    return buffered === undefined ? core.fromRuntime : Effect.succeed(buffered)
  })

type FrameOf<T extends Messages.RuntimeToCoreType> = Extract<Messages.RuntimeToCore, { readonly type: T }>

/** The next frame, which must have the given type. */
export const next = <T extends Messages.RuntimeToCoreType>(core: MemoryTransport, type: T) =>
  Effect.gen(function* () {
    const frame = yield* read(core)
    if (frame.type !== type) {
      return yield* Effect.die(new Error(`expected a ${type} frame, got ${frame.type}: ${JSON.stringify(frame)}`))
    }
    return frame as FrameOf<T>
  })

/**
 * The first frame of the given type, for frames whose order relative to other families is not defined (a
 * receipt and the Run output it caused). Frames read past stay buffered for `next` / `take`.
 */
export const take = <T extends Messages.RuntimeToCoreType>(core: MemoryTransport, type: T) =>
  Effect.gen(function* () {
    const buffer = bufferOf(core)
    const index = buffer.findIndex((f) => f.type === type)
    if (index >= 0) return buffer.splice(index, 1)[0] as FrameOf<T>
    while (true) {
      const frame = yield* core.fromRuntime
      if (frame.type === type) return frame as FrameOf<T>
      buffer.push(frame)
    }
  })

/** The next frame that is not a heartbeat. */
export const nextNonHeartbeat = (core: MemoryTransport) =>
  Effect.gen(function* () {
    while (true) {
      const frame = yield* read(core)
      if (frame.type !== "heartbeat") return frame
    }
  })

/** Takes frames until (and including) the first of the given type; returns them all. */
export const until = (core: MemoryTransport, type: Messages.RuntimeToCoreType) =>
  Effect.gen(function* () {
    const frames: Array<Messages.RuntimeToCore> = []
    while (true) {
      const frame = yield* read(core)
      frames.push(frame)
      if (frame.type === type) return frames
    }
  })

/** True when the Runtime sent nothing more after everything runnable ran. */
export const silent = (core: MemoryTransport) =>
  Effect.andThen(settle, Effect.map(core.pending, (n) => n === 0 && bufferOf(core).length === 0))

/** Advances the clock by `d` and lets woken fibers run. */
export const adjust = (d: Duration.Input) => Effect.andThen(TestClock.adjust(d), settle)

/** One turn of the real event loop, so real I/O that a woken fiber started (a file close) can complete. */
const realIoTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/**
 * Advances the clock in `step`s, up to `limit` in all, until the Runtime has sent a frame: for waits where a
 * retry performs real I/O before it sleeps again (a single `adjust` would pass the next retry's deadline before
 * its sleep is registered). Returns the time advanced, so a test can still check a lower bound.
 */
export const adjustUntilSent = (core: MemoryTransport, limit: Duration.Input, step: Duration.Input = "1 second") =>
  Effect.gen(function* () {
    const end = Duration.toMillis(Duration.fromInputUnsafe(limit))
    const by = Duration.toMillis(Duration.fromInputUnsafe(step))
    let advanced = 0
    while (advanced < end && (yield* core.pending) === 0 && bufferOf(core).length === 0) {
      yield* adjust(by)
      advanced += by
      for (let i = 0; i < 3 && (yield* core.pending) === 0; i++) yield* realIoTurn
    }
    return advanced
  })

/** The configuration Core sends with execution_prepare for the scripted kind. */
export const preparedConfiguration = (overrides: Partial<PromptRequestPayload> = {}): PromptRequestPayload => ({
  agent_kind: "scripted",
  conversation_id: "",
  run_id: "",
  agent_state_key: `agents-api-${SessionId}`,
  release_on_completion: true,
  strict_resume: true,
  observe_tool_observations: true,
  disable_execution_environment: true,
  execution_controls: { web_search: "disabled", text_verbosity: "medium" },
  ...overrides
})

export const prepareFrame = (
  requestId: string,
  overrides: Partial<PromptRequestPayload> = {},
  sessionId: string = SessionId
): Messages.CoreToRuntime => ({
  type: "execution_prepare",
  id: unsafeMake.preparationRequestId(requestId),
  payload: {
    session_id: unsafeMake.sessionId(sessionId),
    configuration: { ...preparedConfiguration(overrides), agent_state_key: `agents-api-${sessionId}` }
  }
})

export const text = (t: string) => [{ content: [{ type: "input_text" as const, text: t }] }]
export const script = (steps: ReadonlyArray<unknown>) => text(JSON.stringify({ script: steps }))

export const startFrame = (
  requestId: string,
  executorId: string,
  handle: string,
  runId: string,
  input: MessageInput
): Messages.CoreToRuntime => ({
  type: "execution_start",
  id: unsafeMake.preparationRequestId(requestId),
  payload: {
    executor_id: unsafeMake.executorId(executorId),
    handle: unsafeMake.admissionHandle(handle),
    run_id: unsafeMake.runId(runId),
    input
  }
})

export const releaseFrame = (requestId: string, handle: string): Messages.CoreToRuntime => ({
  type: "execution_release",
  id: unsafeMake.preparationRequestId(requestId),
  payload: { handle: unsafeMake.admissionHandle(handle) }
})

export const promptFrame = (
  runId: string,
  input: MessageInput,
  overrides: Partial<PromptRequestPayload> = {}
): Messages.CoreToRuntime => ({
  type: "prompt_request",
  id: unsafeMake.runId(runId),
  payload: {
    agent_kind: "scripted",
    conversation_id: "",
    run_id: runId,
    input,
    release_on_completion: true,
    strict_resume: true,
    disable_execution_environment: true,
    ...overrides
  }
})

export const cancelFrame = (runId: string, deliveryId?: string): Messages.CoreToRuntime => ({
  type: "prompt_cancel",
  id: unsafeMake.runId(runId),
  payload: deliveryId === undefined ? {} : { delivery_id: unsafeMake.deliveryId(deliveryId) }
})

export const steerFrame = (runId: string, inputId: string, input: MessageInput, durable = true): Messages.CoreToRuntime => ({
  type: "prompt_steer",
  id: unsafeMake.runId(runId),
  payload: { input_id: unsafeMake.inputId(inputId), input, durable_receipt: durable }
})

/** Prepares (fresh) and returns the ready status; consumes `preparing` and `ready`. */
export const prepareReady = (core: MemoryTransport, requestId: string, overrides: Partial<PromptRequestPayload> = {}) =>
  Effect.gen(function* () {
    yield* core.toRuntime(prepareFrame(requestId, overrides))
    const preparing = yield* next(core, "preparation_status")
    const ready = yield* next(core, "preparation_status")
    return { preparing: preparing.payload, ready: ready.payload }
  })

/** Ends a connection under test from Core's side and waits for `run` to return. */
export const disconnect = (c: { readonly core: MemoryTransport; readonly fiber: Fiber.Fiber<Connection.ConnectionEnd> }) =>
  Effect.andThen(c.core.close(1006), Fiber.join(c.fiber))

/** Deep equality against a plain expected value (wire values carry branded types the literals do not). */
export const same = (actual: unknown, expected: unknown, message?: string) => assert.deepStrictEqual(actual, expected, message)
