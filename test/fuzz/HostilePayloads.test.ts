/**
 * Issue #17's fuzz test: deeply nested and oversized payloads of every message type, sent over real loopback
 * WebSockets to both sides, the real daemon (Daemon.run with the production Connector, against the fake Core)
 * and Core's real gateway (GatewayServer, against the scripted Runtime). For each frame it asserts no crash
 * (the peer still answers a probe on the same connection), no hang (the probe's answer arrives; every wait is
 * an event) and the documented answer (docs/wire-decisions.md W1, docs/gateway.md):
 *
 * - daemon: a refused request of a family with a defined refusal gets that refusal with the frame's id
 *   (`preparation_status`, `prompt_steer_ack`, `error` + `done`, `runtime_prepare_result`,
 *   `workspace_*_result`); anything else gets no reply at all. A frame over 4 MiB closes with 1009. A refused
 *   frame leaves nothing behind: no Run, admission or Executor on the status board (the issue's three
 *   prompt_requests with 10,000-deep agent_options each get error + done and leave no Run active).
 * - Core: a Run frame of an ending family fails exactly its Run's observer with `invalid_run_frame` (a dropped
 *   family's Run goes on to its done); a heartbeat closes the connection
 *   with 1008 `invalid_heartbeat`; anything else is dropped and the connection stays. A frame over 4 MiB
 *   closes with 1009. A binary frame is refused even when it holds a valid envelope (over the real socket).
 *
 * Valid messages come from Effect's own `Arbitrary.schema` (decision T1), seeded per type; the hostile part
 * (nesting shape, depth, position, value count) from a seeded generator. Timers run on TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Effect, Exit, Fiber, Layer, Option, Random, Redacted, type Schema, Stream } from "effect"
import { DeviceCredentials } from "../../src/core/DeviceCredentials.js"
import { ObservationLost } from "../../src/core/Errors.js"
import { Gateway } from "../../src/core/Gateway.js"
import { malformedRunFrame } from "../../src/core/RunEvent.js"
import { GatewayServer } from "../../src/core/server/GatewayServer.js"
import { Ids, Limits, Messages } from "../../src/proto/index.js"
import * as Daemon from "../../src/runtime/Daemon.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { Connector } from "../../src/runtime/transport/Connector.js"
import { deviceId, dialOk, frames, heartbeat, kind, type ScriptedRuntime } from "../support/coreScriptedRuntime.js"
import { type CoreConnection, FakeCore } from "../support/runtimeFakeCore.js"
import { coreToRuntimeSamples } from "../proto/support/samples.js"

// ---------------------------------------------------------------------------------------------- hostile frames

type Shape = "arrays" | "objects" | "mixed"

/** JSON text nesting `depth` containers around a leaf, iteratively built. */
const nest = (shape: Shape, depth: number): string => {
  const open: Array<string> = []
  const close: Array<string> = []
  for (let i = 0; i < depth; i++) {
    const array = shape === "arrays" || (shape === "mixed" && i % 2 === 0)
    open.push(array ? "[" : '{"k":')
    close.push(array ? "]" : "}")
  }
  return open.join("") + "0" + close.reverse().join("")
}

interface Hostile {
  readonly label: string
  /** The hole's JSON text. */
  readonly hole: string
}

/** Seeded hostile holes: just past the depth bound, the 6,000, 100,000 deep, and too many values. */
const hostileHoles = (seed: number): ReadonlyArray<Hostile> => {
  const shapes: ReadonlyArray<Shape> = ["arrays", "objects", "mixed"]
  const shape = (n: number) => shapes[(seed + n) % shapes.length]!
  return [
    { label: `${shape(0)} ${Limits.MaxJsonDepth + 1} deep`, hole: nest(shape(0), Limits.MaxJsonDepth + 1) },
    { label: `${shape(1)} 6000 deep`, hole: nest(shape(1), 6000) },
    { label: `${shape(2)} 100000 deep`, hole: nest(shape(2), 100_000) },
    { label: `${Limits.MaxJsonNodes + 1} values`, hole: `[${"0,".repeat(Limits.MaxJsonNodes)}0]` }
  ]
}

const HOLE = "\u0000hole\u0000"

/**
 * Puts the hole at a seeded position of the message: a new member of the payload or of an object nested in
 * it (a peer's JSON object: agent_options, args, raw, updated_input …), or of the envelope for a body-less
 * type. Returns the frame text.
 */
const withHole = (message: Record<string, unknown>, hole: string, pick: number): string => {
  const copy = JSON.parse(JSON.stringify(message)) as Record<string, unknown>
  const objects: Array<Record<string, unknown>> = []
  const stack: Array<unknown> = [copy["payload"]]
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value !== "object" || value === null) continue
    if (!Array.isArray(value)) objects.push(value as Record<string, unknown>)
    for (const member of Object.values(value)) stack.push(member)
  }
  const target = objects.length === 0 ? copy : objects[pick % objects.length]!
  target["fuzz"] = HOLE
  return JSON.stringify(copy).replace(JSON.stringify(HOLE), hole)
}

/** One valid message per type of a catalogue, from Effect's Arbitrary (seeded by the type). */
const samplesOf = (catalogue: Readonly<Record<string, { readonly schema: Schema.Top }>>) =>
  Effect.forEach(Object.entries(catalogue), ([type, d]) =>
    Effect.map(
      Arbitrary.sampleEffect(Arbitrary.schema(d.schema as Schema.Codec<unknown, unknown>), { count: 1, seed: `fuzz-${type}`, size: 4 }),
      (samples) => [type, JSON.parse(JSON.stringify(samples[0])) as Record<string, unknown>] as const
    ))

/** The frame's id when the decode can echo it. */
const idOf = (message: Record<string, unknown>): string | undefined => {
  const id = message["id"]
  return typeof id === "string" && id.trim() !== "" && Buffer.byteLength(id) <= Limits.MaxCorrelationIdBytes ? id : undefined
}

// ---------------------------------------------------------------------------------------------- the daemon

/** The daemon's documented refusal of an invalid request, by request type (others: no reply). */
const daemonRefusal: Readonly<Record<string, ReadonlyArray<string>>> = {
  execution_prepare: ["preparation_status"],
  execution_start: ["preparation_status"],
  execution_release: ["preparation_status"],
  environment_quiesce: ["environment_quiesced"],
  environment_resume: ["environment_resumed"],
  prompt_steer: ["prompt_steer_ack"],
  prompt_request: ["error", "done"],
  runtime_prepare: ["runtime_prepare_result"],
  workspace_read: ["workspace_read_result"],
  workspace_write: ["workspace_write_result"]
}

const startDaemon = (apiBase: string) =>
  Effect.gen(function*() {
    const id = Ids.unsafeMake.deviceId("dev-fuzz")
    const board = yield* StatusBoard.make({ daemonVersion: "0.1.0", wireVersion: "0.10.0", pid: 1, deviceId: id, coreUrl: apiBase })
    const fiber = yield* Daemon.run({ deviceId: id, coreOrigin: apiBase }).pipe(
      Effect.provide(
        Connector.layer({ apiBase, deviceId: id, credential: Redacted.make("cred-FUZZ"), userAgent: "agentwire/fuzz", transport: { livenessTimeout: false } })
      ),
      Effect.provideService(StatusBoard, board),
      Effect.provide(RuntimeProcess.layer({})),
      Effect.provideService(Random.Random, { nextDoubleUnsafe: () => 0.5, nextIntUnsafe: () => 0 }),
      Effect.forkChild
    )
    return { daemon: fiber, board }
  })

/** What a refused frame must not leave behind: no Run, admission or Executor on the daemon's status board. */
const leftBehind = (board: StatusBoard["Service"]) =>
  Effect.map(board.snapshot, (s) => ({ active_runs: s.active_runs, runs: s.runs, admissions: s.admissions, executors: s.executors }))
const nothingLeft = { active_runs: 0, runs: [], admissions: [], executors: [] }

let probes = 0
/** Sends a valid workspace_read (always answered: R8) and returns every non-heartbeat frame up to its answer. */
const probeDaemon = (core: CoreConnection) =>
  Effect.gen(function*() {
    const id = `probe-${++probes}`
    yield* core.send({ ...coreToRuntimeSamples.workspace_read.message, id: Ids.unsafeMake.operationId(id) })
    const before: Array<Messages.RuntimeToCore> = []
    while (true) {
      const frame = yield* core.received
      if (frame.type === "workspace_read_result" && frame.id === id) return before
      if (frame.type !== "heartbeat") before.push(frame)
    }
  })

describe("fuzz: hostile payloads to the daemon over loopback", () => {
  it.effect("every Core → Runtime type, deep and oversized: no crash, no hang, the documented refusal or none", () =>
    Effect.gen(function*() {
      const core = yield* FakeCore.make
      const { board, daemon } = yield* startDaemon(core.apiBase)
      const connection = yield* core.nextConnection
      assert.strictEqual((yield* connection.received).type, "heartbeat")
      const samples = yield* samplesOf(Messages.coreToRuntime)
      let seed = 0
      for (const [type, message] of samples) {
        for (const hostile of hostileHoles(seed)) {
          const frame = withHole(message, hostile.hole, seed++)
          yield* connection.send(frame)
          const replies = yield* probeDaemon(connection)
          const context = `${type} (${hostile.label})`
          const expected = daemonRefusal[type]
          const id = idOf(message)
          for (const reply of replies) {
            assert.include(expected ?? [], reply.type, `${context}: unexpected ${reply.type}`)
            assert.strictEqual("id" in reply ? reply.id : undefined, id, `${context}: reply id`)
          }
          if (expected !== undefined && id !== undefined && type !== "execution_start") {
            // execution_start's refusal is published only for a handle this connection granted.
            assert.isAbove(replies.length, 0, `${context}: no refusal`)
          }
          assert.isUndefined(daemon.pollUnsafe(), `${context}: the daemon stopped`)
        }
      }
      // Every refused frame left nothing behind.
      assert.deepStrictEqual(yield* leftBehind(board), nothingLeft)
      // A frame over 4 MiB: the connection closes with 1009, the daemon keeps running (and reconnects).
      yield* connection.send(withHole(samples[0]![1], JSON.stringify("x".repeat(Limits.MaxFrameBytes)), 0))
      assert.strictEqual((yield* connection.closed).code, 1009)
      assert.isUndefined(daemon.pollUnsafe())
      yield* Fiber.interrupt(daemon)
    }), 90_000)

  it.effect("three prompt_requests with 10,000-deep agent_options: each answered error then done, no Run left active", () =>
    Effect.gen(function*() {
      const core = yield* FakeCore.make
      const { board, daemon } = yield* startDaemon(core.apiBase)
      const connection = yield* core.nextConnection
      assert.strictEqual((yield* connection.received).type, "heartbeat")
      const ids = ["run-deep-1", "run-deep-2", "run-deep-3"]
      for (const id of ids) {
        const sample = coreToRuntimeSamples.prompt_request.message
        const message = { ...sample, id, payload: { ...sample.payload, run_id: id, agent_options: { a: HOLE } } }
        yield* connection.send(JSON.stringify(message).replace(JSON.stringify(HOLE), nest("mixed", 10_000)))
      }
      // Each refusal is error + done on its own id (sent in the background: the probe may overtake them).
      const replies: Array<Messages.RuntimeToCore> = []
      for (let probe = 0; probe < 8 && replies.length < 2 * ids.length; probe++) replies.push(...(yield* probeDaemon(connection)))
      for (const id of ids) {
        const own = replies.filter((r) => "id" in r && r.id === id)
        assert.deepStrictEqual(own.map((r) => [r.type, "payload" in r ? r.payload : undefined]), [
          ["error", { error: "invalid prompt_request" }],
          ["done", { content: "" }]
        ], id)
      }
      assert.strictEqual(replies.length, 2 * ids.length)
      assert.deepStrictEqual(yield* leftBehind(board), nothingLeft)
      assert.isUndefined(daemon.pollUnsafe())
      yield* Fiber.interrupt(daemon)
    }), 30_000)
})

// ---------------------------------------------------------------------------------------------- Core

const CREDENTIAL = "awdc_fuzz-credential-0123456789"
const coreServer = GatewayServer.layer({ host: "127.0.0.1", port: 0 }).pipe(
  Layer.provide(DeviceCredentials.layerMemory({
    devices: [{ deviceId: "dev-1", workspaceId: "ws-1", runtimeType: "agent-daemon", credential: CREDENTIAL }]
  }))
)

const RUN_EVENT_TYPES = new Set([
  "delta", "thinking", "output_message", "tool_call", "usage", "error", "done", "permission_request",
  "permission_cancel", "prompt_for_user_choice", "function_call", "subagent_identity", "subagent_lifecycle",
  "subagent_turn", "subagent_item", "subagent_coordination"
])

/** A fresh daemon connection to Core (replacing the previous one), declared. */
const connectCore = Effect.gen(function*() {
  const { port } = yield* GatewayServer
  const gateway = yield* Gateway
  const events = yield* gateway.events
  const declared = yield* Stream.filter(events, (e) => e._tag === "Declared").pipe(Stream.runHead, Effect.forkScoped)
  const runtime = yield* dialOk({ wsUrl: `ws://127.0.0.1:${port}/api/v1/agent-daemon/ws`, deviceId: "dev-1", credential: CREDENTIAL })
  yield* runtime.send(heartbeat([kind("codex")]))
  yield* Fiber.join(declared)
  const session = Option.getOrThrow(yield* gateway.session(deviceId("dev-1")))
  return { runtime, session }
})

/** The connection still routes: a fresh Run's done reaches its subscriber. */
const probeCore = (runtime: ScriptedRuntime, session: { subscribeDurable: (id: Ids.RunId) => Effect.Effect<Stream.Stream<unknown, unknown>, unknown, never> }) =>
  Effect.scoped(Effect.gen(function*() {
    const id = `probe-${++probes}`
    const stream = yield* session.subscribeDurable(Ids.unsafeMake.runId(id))
    yield* runtime.send(frames.done(id))
    yield* Stream.runDrain(stream)
  }))

describe("fuzz: hostile payloads to Core over loopback", () => {
  it.effect("every Runtime → Core type, deep and oversized: no crash, no hang, the documented answer", () =>
    Effect.gen(function*() {
      const samples = yield* samplesOf(Messages.runtimeToCore)
      let seed = 0
      for (const [type, message] of samples) {
        yield* Effect.scoped(Effect.gen(function*() {
          const { runtime, session } = yield* connectCore
          for (const hostile of hostileHoles(seed)) {
            const context = `${type} (${hostile.label})`
            // A fresh Run per frame: each observer sees exactly one hostile frame.
            const sample = "id" in message ? { ...message, id: `fuzz-run-${seed}` } : message
            const id = idOf(sample)
            const observed = RUN_EVENT_TYPES.has(type) && id !== undefined && type !== "permission_cancel"
              // Subscribed before the frame is sent; drained concurrently.
              ? Option.some(yield* Effect.forkScoped(Effect.exit(Stream.runDrain(yield* session.subscribeDurable(Ids.unsafeMake.runId(id))))))
              : Option.none()
            yield* runtime.sendRaw(withHole(sample, hostile.hole, seed++))
            if (type === "heartbeat") {
              assert.deepStrictEqual(yield* runtime.closedByCore, { code: 1008, reason: "invalid_heartbeat" }, context)
              return
            }
            if (Option.isSome(observed)) {
              if (malformedRunFrame[type as keyof typeof malformedRunFrame] === "end") {
                assert.deepStrictEqual(
                  yield* Fiber.join(observed.value),
                  Exit.fail(new ObservationLost({ reason: "invalid_run_frame" })),
                  context
                )
              } else {
                // A family whose malformed frame is dropped: the Run's stream goes on to its done.
                yield* runtime.send(frames.done(id!))
                assert.deepStrictEqual(yield* Fiber.join(observed.value), Exit.void, context)
              }
            }
            yield* probeCore(runtime, session as never)
          }
        }))
      }
      // A frame over 4 MiB closes the connection with 1009; Core keeps serving the next connection.
      yield* Effect.scoped(Effect.gen(function*() {
        const { runtime } = yield* connectCore
        yield* runtime.sendRaw(withHole(samples[0]![1], JSON.stringify("x".repeat(Limits.MaxFrameBytes)), 0))
        assert.strictEqual((yield* runtime.closedByCore).code, 1009)
      }))
      yield* Effect.scoped(Effect.gen(function*() {
        const { runtime, session } = yield* connectCore
        yield* probeCore(runtime, session as never)
        // A binary WebSocket frame is refused even when its bytes are a valid envelope (one envelope per text
        // frame): this heartbeat's new declaration is never taken, and the connection stays.
        const encoded = Messages.encodeMessage(heartbeat([kind("claude_code")]))
        assert.isTrue(encoded._tag === "Success")
        yield* runtime.sendBinary(new TextEncoder().encode(encoded._tag === "Success" ? encoded.success : ""))
        yield* probeCore(runtime, session as never)
        const declared = Option.getOrThrow(yield* session.declaration)
        assert.deepStrictEqual([...declared.kinds.keys()], ["codex"])
      }))
      // A 100,000-deep bootstrap body gets its 400 and nothing else happens.
      const { baseUrl } = yield* GatewayServer
      const status = yield* Effect.promise(() =>
        fetch(`${baseUrl}/api/v1/agent-daemon/bootstrap`, {
          method: "POST",
          headers: { authorization: `Bearer ${CREDENTIAL}`, "content-type": "application/json" },
          body: `{"device_id":${nest("arrays", 20_000)}}`
        }).then((r) => r.status)
      )
      assert.strictEqual(status, 400)
    }).pipe(Effect.provide(coreServer)), 90_000)
})
