/**
 * The WebSocket transport and the connector over a real loopback WebSocket against the scripted fake Core.
 * Timers (handshake budget) run on the TestClock; I/O is synchronized through the fake Core's queues.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Fiber, Layer, Metric, Redacted, Result, Scope, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import { InvalidFrame } from "../../../src/proto/Envelope.js"
import { encodeChunkFrame } from "../../../src/proto/EncodedFrame.js"
import { Ids, Messages } from "../../../src/proto/index.js"
import { ConnectFailed, ConnectRejected } from "../../../src/runtime/transport/ConnectError.js"
import { Connector } from "../../../src/runtime/transport/Connector.js"
import { TransportClosed } from "../../../src/runtime/transport/Transport.js"
import { dial, dialUrl } from "../../../src/runtime/transport/WebSocketTransport.js"
import { parsePrometheusText, sumOf } from "../../support/prometheusText.js"
import { FakeCore, reply } from "../../support/runtimeFakeCore.js"

const credential = Redacted.make("cred-DIAL-51c9")
const deviceId = Ids.unsafeMake.deviceId("dev-1")
const runId = Ids.unsafeMake.runId("run-1")

const dialCore = (core: { readonly port: number }, wsUrl?: string) =>
  dial({
    wsUrl: wsUrl ?? `ws://127.0.0.1:${core.port}/api/v1/agent-daemon/ws?token=leak`,
    deviceId,
    credential,
    userAgent: "agentwire/test",
    transport: { livenessTimeout: false }
  })

describe("WebSocketTransport.dial", () => {
  it("adds device_id and version, and removes a token parameter", () => {
    assert.strictEqual(
      dialUrl("wss://core.example/api/v1/agent-daemon/ws?token=abc&region=eu", "dev 1"),
      "wss://core.example/api/v1/agent-daemon/ws?region=eu&device_id=dev+1&version=0.10.0"
    )
  })

  it.effect("dials with the Bearer header and the query, exchanges frames, and closes with 1000 when the scope closes", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const scope = yield* Scope.make()
      const transport = yield* dialCore(core).pipe(Scope.provide(scope))
      const conn = yield* core.nextConnection
      assert.strictEqual(conn.url, "/api/v1/agent-daemon/ws?device_id=dev-1&version=0.10.0")
      assert.strictEqual(conn.headers["authorization"], "Bearer cred-DIAL-51c9")
      assert.strictEqual(conn.headers["user-agent"], "agentwire/test")
      yield* transport.send({ type: "delta", id: runId, payload: { delta: "hi", sequence: 1 } })
      assert.deepStrictEqual(yield* conn.received, { type: "delta", id: runId, payload: { delta: "hi", sequence: 1 } })
      yield* conn.send({ type: "prompt_cancel", id: runId, payload: {} })
      const pull = yield* Stream.toPull(transport.inbound).pipe(Scope.provide(scope))
      const [first] = yield* pull
      assert.deepStrictEqual(first, {
        _tag: "Message",
        message: { type: "prompt_cancel", id: runId, payload: {} },
        bytes: JSON.stringify({ type: "prompt_cancel", id: "run-1", payload: {} }).length
      })
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* conn.closed, { code: 1000, reason: "client closing" })
    }))

  it.effect("sendAll writes a batch over the real socket; every frame arrives, in order, before a later send", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const transport = yield* dialCore(core)
      const conn = yield* core.nextConnection
      const frames = Array.from({ length: 50 }, (_, i) => ({ type: "delta" as const, id: runId, payload: { delta: `d${i}`, sequence: i + 1 } }))
      yield* transport.sendAll(frames)
      yield* transport.send({ type: "done", id: runId, payload: { content: "" } })
      for (const frame of frames) assert.deepStrictEqual(yield* conn.received, frame)
      assert.deepStrictEqual(yield* conn.received, { type: "done", id: runId, payload: { content: "" } })
    }))

  it.effect("long frames (sent as UTF-8 bytes) arrive as text frames with the codec's exact text", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const transport = yield* dialCore(core)
      const conn = yield* core.nextConnection
      const long = (i: number): Messages.RuntimeToCore => ({ type: "delta", id: runId, payload: { delta: `é€😀 "${i}" `.repeat(300), sequence: i } })
      const chunk = encodeChunkFrame({ type: "workspace_export_result", id: Ids.unsafeMake.operationId("6a1d3e9f-0b52-4c48-9f7e-2d3e4f5a6b7c"), payload: { outcome: "chunk", offset: 0 } }, new Uint8Array(65536).fill(7))
      assert.isTrue(Result.isSuccess(chunk))
      if (Result.isFailure(chunk)) return
      yield* transport.send(long(1))
      yield* transport.sendAll([long(2), chunk.success, long(3)])
      for (const expected of [Messages.encodeMessage(long(1)), Messages.encodeMessage(long(2)), Result.succeed(chunk.success.encoded), Messages.encodeMessage(long(3))]) {
        assert.deepStrictEqual(Result.succeed(yield* conn.receivedText), expected)
      }
    }))

  it.effect("a binary frame from Core arrives as Invalid; the connection stays open", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const transport = yield* dialCore(core)
      const conn = yield* core.nextConnection
      yield* conn.sendBinary(new Uint8Array([123, 125]))
      yield* conn.send({ type: "prompt_cancel", id: runId, payload: {} })
      const items = yield* Stream.runCollect(Stream.take(transport.inbound, 2))
      assert.deepStrictEqual(items[0], { _tag: "Invalid", error: new InvalidFrame({ code: "not_json", bytes: 2 }) })
      assert.strictEqual(items[1]?._tag, "Message")
    }))

  it.effect("Core's close code 4001 ends the inbound stream with that code", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const transport = yield* dialCore(core)
      const conn = yield* core.nextConnection
      yield* conn.close(4001, "runtime retired")
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "closed_by_peer", code: 4001 })
      )
    }))

  it.effect("a dropped TCP connection ends the inbound stream as read_failed", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const transport = yield* dialCore(core)
      const conn = yield* core.nextConnection
      yield* conn.terminate
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "read_failed" })
      )
    }))

  it.effect("an inbound frame over 4 MiB fails the connection", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const transport = yield* dialCore(core)
      const conn = yield* core.nextConnection
      yield* conn.send(JSON.stringify({ type: "prompt_cancel", id: "run-1", payload: { x: "y".repeat(4 * 1024 * 1024) } }))
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "read_failed" })
      )
      // Refused unread by the socket's maxPayload, and still counted as a decode failure (issue #22).
      const metrics = parsePrometheusText(yield* PrometheusMetrics.format())
      assert.strictEqual(sumOf(metrics, "agentwire_daemon_decode_failures_total", { reason: "frame_too_large" }), 1)
      assert.strictEqual(sumOf(metrics, "agentwire_daemon_decode_failures_total"), 1)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("a refused upgrade maps 426/401/403 to ConnectRejected with Core's code, others to ConnectFailed", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptUpgrade(
        reply.upgradeError(426, "incompatible_version", "daemon protocol 0.10.0 incompatible with server 0.11.0"),
        reply.upgradeError(401, "bad_credential"),
        reply.upgradeError(403, "wrong_runtime_type"),
        reply.upgradeError(500, "internal"),
        { _tag: "refuse", status: 503, body: "<html>" }
      )
      const attempt = Effect.flip(Effect.scoped(dialCore(core)))
      assert.deepStrictEqual(
        yield* attempt,
        new ConnectRejected({ phase: "upgrade", status: 426, code: "incompatible_version" })
      )
      assert.deepStrictEqual(yield* attempt, new ConnectRejected({ phase: "upgrade", status: 401, code: "bad_credential" }))
      assert.deepStrictEqual(
        yield* attempt,
        new ConnectRejected({ phase: "upgrade", status: 403, code: "wrong_runtime_type" })
      )
      assert.deepStrictEqual(
        yield* attempt,
        new ConnectFailed({ phase: "upgrade", reason: "http_status", status: 500, code: "internal" })
      )
      assert.deepStrictEqual(yield* attempt, new ConnectFailed({ phase: "upgrade", reason: "http_status", status: 503 }))
    }))

  it.effect("a refused TCP connection is a transient network failure", () =>
    Effect.gen(function* () {
      const port = yield* Effect.scoped(Effect.map(FakeCore.make, (core) => core.port))
      assert.deepStrictEqual(
        yield* Effect.flip(Effect.scoped(dialCore({ port }))),
        new ConnectFailed({ phase: "upgrade", reason: "network", detail: "ECONNREFUSED" })
      )
    }))

  it.effect("a handshake still unanswered after 10 s fails as timeout (1 ms before: still waiting)", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptUpgrade({ _tag: "hang" })
      const fiber = yield* Effect.forkChild(Effect.scoped(dialCore(core)))
      yield* core.nextRequest
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new ConnectFailed({ phase: "upgrade", reason: "timeout" })
      )
    }))
})

describe("Connector", () => {
  const layer = (apiBase: string) =>
    Connector.layer({ apiBase, deviceId, credential, userAgent: "agentwire/test", transport: { livenessTimeout: false } })

  it.effect("bootstraps, then dials the ws_url bootstrap returned, with bootstrap's heartbeat interval", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "default", heartbeat_seconds: 5 })
      const connector = Context.get(yield* Layer.build(layer(core.apiBase)), Connector)
      const connected = yield* connector.connect
      assert.deepStrictEqual(connected.heartbeatInterval, Duration.seconds(5))
      assert.strictEqual(connected.coreVersion, "0.10.0")
      const conn = yield* core.nextConnection
      assert.strictEqual(conn.url, "/api/v1/agent-daemon/ws?device_id=dev-1&version=0.10.0")
      assert.deepStrictEqual((yield* core.requests).map((r) => r.route), ["bootstrap", "upgrade"])
    }))

  it.effect("a 426 during the upgrade carries Core's wire version from bootstrap", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "default", protocol_version: "0.11.0" })
      yield* core.scriptUpgrade(reply.upgradeError(426, "incompatible_version"))
      const connector = Context.get(yield* Layer.build(layer(core.apiBase)), Connector)
      assert.deepStrictEqual(
        yield* Effect.flip(Effect.scoped(connector.connect)),
        new ConnectRejected({ phase: "upgrade", status: 426, code: "incompatible_version", core_version: "0.11.0" })
      )
    }))
})
