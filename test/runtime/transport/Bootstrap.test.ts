import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Logger, Redacted, References } from "effect"
import { TestClock } from "effect/testing"
import { Ids } from "../../../src/proto/index.js"
import { bootstrap, MaxBootstrapResponseBytes, sanitizeWsUrl } from "../../../src/runtime/transport/Bootstrap.js"
import { ConnectFailed, ConnectRejected } from "../../../src/runtime/transport/ConnectError.js"
import { FakeCore, reply } from "../../support/runtimeFakeCore.js"

const credential = Redacted.make("cred-BOOTSTRAP-7f3a")
const deviceId = Ids.unsafeMake.deviceId("7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11")

const run = (apiBase: string) =>
  bootstrap({ apiBase, deviceId, credential, userAgent: "agentwire/test" }).pipe(
    Effect.provide(NodeHttpClient.layerNodeHttp)
  )

describe("Bootstrap", () => {
  it.effect("posts {device_id} with the Bearer header and returns the connection parameters", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "default", heartbeat_seconds: 7 })
      const result = yield* run(core.apiBase)
      assert.deepStrictEqual(result, {
        deviceId,
        wsUrl: `ws://127.0.0.1:${core.port}/api/v1/agent-daemon/ws`,
        heartbeatInterval: Duration.seconds(7),
        protocolVersion: "0.10.0"
      })
      const [seen] = yield* core.requests
      assert.strictEqual(seen?.method, "POST")
      assert.strictEqual(seen?.url, "/api/v1/agent-daemon/bootstrap")
      assert.strictEqual(seen?.headers["authorization"], "Bearer cred-BOOTSTRAP-7f3a")
      assert.strictEqual(seen?.headers["content-type"], "application/json")
      assert.strictEqual(seen?.headers["user-agent"], "agentwire/test")
      assert.deepStrictEqual(JSON.parse(seen?.body ?? ""), { device_id: deviceId })
    }))

  it.effect("falls back to a 15 s heartbeat when bootstrap returns none or a value <= 0", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "default", heartbeat_seconds: 0 }, {
        _tag: "raw",
        status: 200,
        body: JSON.stringify({ device_id: "d", ws_url: "ws://127.0.0.1:1/ws" })
      })
      assert.deepStrictEqual((yield* run(core.apiBase)).heartbeatInterval, Duration.seconds(15))
      const second = yield* run(core.apiBase)
      assert.deepStrictEqual(second.heartbeatInterval, Duration.seconds(15))
      assert.strictEqual(second.protocolVersion, undefined)
    }))

  it.effect("clamps heartbeat_seconds to [1 s, 300 s] and logs each clamp: 1 ms becomes 1 s, a day becomes 5 minutes", () => {
    const clamps: Array<unknown> = []
    const logger = Logger.make((options) => {
      if (String(options.message).includes("clamped")) {
        clamps.push(options.fiber.getRef(References.CurrentLogAnnotations))
      }
    })
    return Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap(
        { _tag: "default", heartbeat_seconds: 0.001 },
        { _tag: "default", heartbeat_seconds: 86_400 },
        { _tag: "default", heartbeat_seconds: 1 },
        { _tag: "default", heartbeat_seconds: 300 }
      )
      assert.deepStrictEqual((yield* run(core.apiBase)).heartbeatInterval, Duration.seconds(1))
      assert.deepStrictEqual((yield* run(core.apiBase)).heartbeatInterval, Duration.seconds(300))
      assert.deepStrictEqual((yield* run(core.apiBase)).heartbeatInterval, Duration.seconds(1))
      assert.deepStrictEqual((yield* run(core.apiBase)).heartbeatInterval, Duration.seconds(300))
      // Only the two values outside the range were clamped, each with one log line naming both values.
      assert.deepStrictEqual(clamps, [
        { heartbeat_seconds: 0.001, used_seconds: 1 },
        { heartbeat_seconds: 86_400, used_seconds: 300 }
      ])
    }).pipe(Effect.provide(Logger.layer([logger])))
  })

  it.effect("401 and 403 are permanent rejections carrying Core's error code", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap(
        reply.bootstrapError(401, "bad_credential", "the credential cred-BOOTSTRAP-7f3a is wrong"),
        reply.bootstrapError(403, "wrong_runtime_type")
      )
      const first = yield* Effect.flip(run(core.apiBase))
      assert.deepStrictEqual(first, new ConnectRejected({ phase: "bootstrap", status: 401, code: "bad_credential" }))
      assert.notInclude(first.message, "cred-BOOTSTRAP")
      assert.deepStrictEqual(
        yield* Effect.flip(run(core.apiBase)),
        new ConnectRejected({ phase: "bootstrap", status: 403, code: "wrong_runtime_type" })
      )
    }))

  it.effect("other statuses are transient failures; a body that is not Core's error shape loses only the code", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap(reply.bootstrapError(500, "internal"), { _tag: "raw", status: 502, body: "<html>bad gateway</html>" })
      assert.deepStrictEqual(
        yield* Effect.flip(run(core.apiBase)),
        new ConnectFailed({ phase: "bootstrap", reason: "http_status", status: 500, code: "internal" })
      )
      const second = yield* Effect.flip(run(core.apiBase))
      assert.deepStrictEqual(second, new ConnectFailed({ phase: "bootstrap", reason: "http_status", status: 502 }))
      assert.notInclude(second.message, "html")
    }))

  it.effect("refuses a malformed reply, an empty device id and a reply over 64 KiB", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap(
        { _tag: "raw", status: 200, body: "not json" },
        { _tag: "raw", status: 200, body: JSON.stringify({ device_id: "", ws_url: "ws://h/ws" }) },
        {
          _tag: "raw",
          status: 200,
          body: JSON.stringify({ device_id: "d", ws_url: "ws://h/ws", pad: "x".repeat(MaxBootstrapResponseBytes) })
        }
      )
      const invalid = new ConnectFailed({ phase: "bootstrap", reason: "invalid_response" })
      assert.deepStrictEqual(yield* Effect.flip(run(core.apiBase)), invalid)
      assert.deepStrictEqual(yield* Effect.flip(run(core.apiBase)), invalid)
      assert.deepStrictEqual(yield* Effect.flip(run(core.apiBase)), invalid)
    }))

  it.effect("strips a token query parameter and a fragment from ws_url", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "default", ws_url: "wss://core.example/api/v1/agent-daemon/ws?token=abc&x=1#frag" })
      assert.strictEqual((yield* run(core.apiBase)).wsUrl, "wss://core.example/api/v1/agent-daemon/ws?x=1")
    }))

  it("checks ws_url: ws or wss only, no user info, never ws:// behind an https API", () => {
    assert.deepStrictEqual(
      sanitizeWsUrl("http://core/ws", "http://core/api/v1"),
      sanitizeWsUrl("ws://u:p@core/ws", "http://core/api/v1")
    )
    assert.isTrue(sanitizeWsUrl("ws://core/ws", "http://core/api/v1")._tag === "Success")
    const insecure = sanitizeWsUrl("ws://core/ws", "https://core/api/v1")
    assert.deepStrictEqual(
      insecure._tag === "Failure" ? insecure.failure : undefined,
      new ConnectFailed({ phase: "bootstrap", reason: "insecure_ws_url" })
    )
    const notUrl = sanitizeWsUrl("::", "http://core/api/v1")
    assert.deepStrictEqual(
      notUrl._tag === "Failure" ? notUrl.failure : undefined,
      new ConnectFailed({ phase: "bootstrap", reason: "invalid_ws_url" })
    )
  })

  it.effect("a refused TCP connection is a transient network failure with the system error code", () =>
    Effect.gen(function* () {
      const port = yield* Effect.scoped(Effect.map(FakeCore.make, (core) => core.port))
      const error = yield* Effect.flip(run(`http://127.0.0.1:${port}/api/v1`))
      assert.deepStrictEqual(error, new ConnectFailed({ phase: "bootstrap", reason: "network", detail: "ECONNREFUSED" }))
    }))

  it.effect("gives up after 10 s without a reply (1 ms before: still waiting)", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "hang" })
      const fiber = yield* Effect.forkChild(run(core.apiBase))
      yield* core.nextRequest
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new ConnectFailed({ phase: "bootstrap", reason: "timeout" })
      )
    }))
})
