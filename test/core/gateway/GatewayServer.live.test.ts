/**
 * End to end over a real loopback WebSocket: a scripted Runtime bootstraps over HTTP, dials the returned
 * ws_url with its Bearer credential and exchanges frames with the real gateway. Handshakes use gateway
 * events and Deferreds; the only timers are TestClock's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Fiber, Layer, Metric, Option, Result, Scope, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import { DeviceCredentials } from "../../../src/core/DeviceCredentials.js"
import { ObservationLost } from "../../../src/core/Errors.js"
import { Gateway, type GatewayEvent } from "../../../src/core/Gateway.js"
import { GatewayServer } from "../../../src/core/server/GatewayServer.js"
import { TrackedWebSocket } from "../../../src/core/transport/internal/webSocket.js"
import { EncodedFrame, Ids, Limits, type Messages } from "../../../src/proto/index.js"
import { deviceId, dialOk, frames, heartbeat, runId } from "../../support/coreScriptedRuntime.js"
import { parsePrometheusText, sumOf } from "../../support/prometheusText.js"
import { collect } from "./helpers.js"

const CREDENTIAL = "awdc_live-credential-0123456789"
const credentials = DeviceCredentials.layerMemory({
  devices: [{ deviceId: "dev-1", workspaceId: "ws-1", runtimeType: "agent-daemon", credential: CREDENTIAL }]
})
const serverLayer = GatewayServer.layer({ host: "127.0.0.1", port: 0 }).pipe(Layer.provide(credentials))
/** The same credentials, each lookup answered on a later turn of the event loop (as a store's would be). */
const slowCredentials = Layer.effect(
  DeviceCredentials,
  Effect.map(DeviceCredentials, (inner) =>
    DeviceCredentials.of({
      ...inner,
      authenticate: (...args) => Effect.andThen(Effect.promise(() => new Promise((resolve) => setImmediate(resolve))), inner.authenticate(...args))
    }))
).pipe(Layer.provide(credentials))
const slowLookupServerLayer = GatewayServer.layer({ host: "127.0.0.1", port: 0 }).pipe(Layer.provide(slowCredentials))

const nextEvent = (tag: GatewayEvent["_tag"]) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway
    const events = yield* gateway.events
    return yield* Stream.filter(events, (e) => e._tag === tag && e.deviceId === "dev-1").pipe(
      Stream.runHead,
      Effect.map(Option.getOrThrow),
      Effect.forkScoped
    )
  })

/** Bootstraps over HTTP and dials the returned ws_url; returns once the gateway registered the connection. */
const connect = Effect.gen(function*() {
  const { baseUrl } = yield* GatewayServer
  const boot = yield* Effect.promise(async () => {
    const response = await fetch(`${baseUrl}/api/v1/agent-daemon/bootstrap`, {
      method: "POST",
      headers: { authorization: `Bearer ${CREDENTIAL}`, "content-type": "application/json" },
      body: JSON.stringify({ device_id: "dev-1" })
    })
    return (await response.json()) as { ws_url: string; heartbeat_seconds: number }
  })
  const connected = yield* nextEvent("Connected")
  const runtime = yield* dialOk({ wsUrl: boot.ws_url, deviceId: "dev-1", credential: CREDENTIAL })
  const event = yield* Fiber.join(connected)
  const gateway = yield* Gateway
  const session = Option.getOrThrow(yield* gateway.session(deviceId("dev-1")))
  assert.strictEqual(session.connectionNumber, event.connectionNumber)
  return { runtime, session, boot }
})

describe("GatewayServer over loopback", () => {
  it.effect("bootstraps, connects, declares and exchanges Run frames both ways", () =>
    Effect.gen(function*() {
      const { boot, runtime, session } = yield* connect
      const { port } = yield* GatewayServer
      assert.strictEqual(boot.ws_url, `ws://127.0.0.1:${port}/api/v1/agent-daemon/ws`)
      assert.strictEqual(boot.heartbeat_seconds, 15)

      const declared = yield* nextEvent("Declared")
      yield* runtime.send(heartbeat())
      yield* Fiber.join(declared)
      assert.isTrue(Option.isSome(yield* session.declaration))

      const run = yield* session.subscribeDurable(runId("run-1"))
      const cancel: Messages.CoreToRuntime = { type: "prompt_cancel", id: runId("run-1"), payload: {} }
      yield* session.send(cancel)
      assert.deepStrictEqual(yield* runtime.receive, cancel)
      // The first delta teaches the read side the Run's layout; later ones are read from the frame's bytes
      // (`DeltaFrame.matchBytes`) when their text has no escape, else from the text: the same events either way.
      const deltas = ["hello", "é€😀 plain", "a\"quoted\"\nline", "", "x".repeat(3000)].map((text, i) =>
        frames.delta("run-1", text, i + 1)
      )
      for (const delta of deltas) yield* runtime.send(delta)
      yield* runtime.send(frames.done("run-1", "hello"))
      const events = yield* collect(run)
      assert.deepStrictEqual(events.items, [...deltas, frames.done("run-1", "hello")])
      assert.isTrue(Exit.isSuccess(events.exit))

      const disconnected = yield* nextEvent("Disconnected")
      yield* runtime.close()
      const ended = yield* Fiber.join(disconnected)
      assert.strictEqual(ended._tag === "Disconnected" ? ended.reason : undefined, "disconnected")
      assert.deepStrictEqual(yield* session.closed, new ObservationLost({ reason: "disconnected" }))
    }).pipe(Effect.provide(serverLayer)))

  it.effect("long frames (a 64 KiB chunk encoded directly, long non-ASCII text) arrive as the same text frames", () =>
    Effect.gen(function*() {
      const { runtime, session } = yield* connect
      const chunk = Uint8Array.from({ length: 65536 }, (_, i) => (i * 7) & 255)
      const id = Ids.unsafeMake.operationId("6a1d3e9f-0b52-4c48-9f7e-2d3e4f5a6b7c")
      const frame = EncodedFrame.encodeChunkFrame({ type: "workspace_write", id, payload: { step: "chunk", offset: 0 } }, chunk)
      assert.isTrue(Result.isSuccess(frame))
      if (Result.isFailure(frame)) return
      yield* session.send(frame.success)
      assert.deepStrictEqual(yield* runtime.receive, frame.success.message)
      const steer: Messages.CoreToRuntime = { type: "device_shutdown", payload: { reason: "é€😀 \"quoted\" ".repeat(400) } }
      yield* session.send(steer)
      assert.deepStrictEqual(yield* runtime.receive, steer)
    }).pipe(Effect.provide(serverLayer)))

  // The platform's upgrade handler adds its listeners after the route's first synchronous run: a lookup that
  // answers at once (memory) runs the whole upgrade inside it, one that answers later (the dev Core's store) not.
  for (const lookup of ["synchronous", "asynchronous"] as const) {
    it.effect(`an open connection keeps no listener of the upgrade's request on its TCP socket, and still ends on close (${lookup} credential lookup)`, () =>
      Effect.gen(function*() {
        // The server side's TCP socket, seen where `ws` takes it over.
        const sockets: Array<import("node:net").Socket> = []
        const original = TrackedWebSocket.prototype.setSocket
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            TrackedWebSocket.prototype.setSocket = function(this: TrackedWebSocket, socket: object, head: Buffer, options: object) {
              sockets.push(socket as import("node:net").Socket)
              return original.call(this, socket, head, options)
            }
          }),
          () => Effect.sync(() => { TrackedWebSocket.prototype.setSocket = original })
        )
        const { runtime, session } = yield* connect
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        assert.strictEqual(sockets.length, 1)
        const tcp = sockets[0]!
        // Left: `ws`'s own listeners and the connection guard's; the platform's request-fiber interrupt and its
        // error no-op (which kept the finished request's scope alive) are gone.
        assert.deepStrictEqual(tcp.listeners("error").map((f) => f.name), ["socketOnError"])
        assert.strictEqual(tcp.listeners("close").length, 2)
        assert.isTrue(tcp.listeners("close").some((f) => f.name === "socketOnClose"))
        const disconnected = yield* nextEvent("Disconnected")
        yield* runtime.close()
        yield* Fiber.join(disconnected)
        assert.deepStrictEqual(yield* session.closed, new ObservationLost({ reason: "disconnected" }))
      }).pipe(Effect.provide(lookup === "synchronous" ? serverLayer : slowLookupServerLayer)))
  }

  it.effect("a second connection for the device replaces the first, which is closed with 4000", () =>
    Effect.gen(function*() {
      const first = yield* connect
      const run = yield* first.session.subscribeDurable(runId("run-1"))
      const second = yield* connect
      assert.deepStrictEqual((yield* first.runtime.closedByCore).code, 4000)
      assert.deepStrictEqual((yield* collect(run)).exit, Exit.fail(new ObservationLost({ reason: "replaced" })))
      const cancel: Messages.CoreToRuntime = { type: "prompt_cancel", id: runId("run-1"), payload: {} }
      yield* second.session.send(cancel)
      assert.deepStrictEqual(yield* second.runtime.receive, cancel)
    }).pipe(Effect.provide(serverLayer)))

  it.effect("closes a silent connection after exactly 60 s of TestClock time", () =>
    Effect.gen(function*() {
      const { runtime } = yield* connect
      yield* TestClock.adjust("59999 millis")
      assert.isTrue(Option.isNone(yield* runtime.poll))
      const disconnected = yield* nextEvent("Disconnected")
      yield* TestClock.adjust("1 millis")
      const ended = yield* Fiber.join(disconnected)
      assert.strictEqual(ended._tag === "Disconnected" ? ended.reason : undefined, "liveness_timeout")
      assert.deepStrictEqual(yield* runtime.closedByCore, { code: 4002, reason: "liveness_timeout" })
    }).pipe(Effect.provide(serverLayer)))

  it.effect("closes the connection with 1009 when a frame exceeds 4 MiB", () =>
    Effect.gen(function*() {
      const { runtime, session } = yield* connect
      yield* runtime.sendRaw(`{"type":"heartbeat","payload":{"pad":"${"x".repeat(Limits.MaxFrameBytes)}"}}`)
      assert.strictEqual((yield* runtime.closedByCore).code, 1009)
      assert.deepStrictEqual(yield* session.closed, new ObservationLost({ reason: "disconnected" }))
      // Refused by the server's maxPayload before it is read, and still counted as a decode failure (issue #22).
      const metrics = parsePrometheusText(yield* PrometheusMetrics.format())
      assert.strictEqual(sumOf(metrics, "agentwire_core_decode_failures_total", { reason: "frame_too_large" }), 1)
      assert.strictEqual(sumOf(metrics, "agentwire_core_decode_failures_total"), 1)
    }).pipe(Effect.provide(serverLayer), Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("shutting the server down ends every session with gateway_shutdown without waiting for a grace period", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(serverLayer, scope)
      const { runtime, session } = yield* connect.pipe(Effect.provide(context))
      const run = yield* session.subscribeDurable(runId("run-1"))
      const started = yield* TestClock.withLive(Clock.currentTimeMillis)
      yield* Scope.close(scope, Exit.void)
      const elapsed = (yield* TestClock.withLive(Clock.currentTimeMillis)) - started
      assert.isBelow(elapsed, 5_000)
      assert.deepStrictEqual((yield* runtime.closedByCore).code, 1001)
      assert.deepStrictEqual((yield* collect(run)).exit, Exit.fail(new ObservationLost({ reason: "gateway_shutdown" })))
      assert.deepStrictEqual(yield* Context.get(context, Gateway).sessions, [])
    }))
})
