/**
 * The machine routes over a real HTTP server on 127.0.0.1 (port 0): bootstrap, device-status and the
 * WebSocket upgrade, their check order and error bodies, and credential hygiene. HTTP requests use fetch;
 * upgrades use the scripted Runtime's real WebSocket client. No timers are involved.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Stream } from "effect"
import { CredentialStoreFailed, DeviceCredentials } from "../../../src/core/DeviceCredentials.js"
import { Gateway, type GatewayEvent } from "../../../src/core/Gateway.js"
import { boundedEcho } from "../../../src/core/server/GatewayHttp.js"
import { GatewayServer } from "../../../src/core/server/GatewayServer.js"
import { Version } from "../../../src/proto/index.js"
import { deviceId, dial, dialOk, heartbeat, type UpgradeRefused } from "../../support/coreScriptedRuntime.js"
import { captureLogs } from "./helpers.js"

const CREDENTIAL = "awdc_test-credential-0123456789"
const OTHER_CREDENTIAL = "awdc_other-device-credential"

const memoryCredentials = DeviceCredentials.layerMemory({
  devices: [
    { deviceId: "dev-1", workspaceId: "ws-1", runtimeType: "agent-daemon", credential: CREDENTIAL },
    { deviceId: "dev-2", workspaceId: "ws-2", runtimeType: "agent-daemon", credential: OTHER_CREDENTIAL },
    { deviceId: "dev-sandbox", workspaceId: "ws-1", runtimeType: "sandbox", credential: "awdc_sandbox-credential" }
  ]
})

/** A credential service that records every call and must never be reached. */
const recordingCredentials = (calls: Array<string>) =>
  Layer.succeed(DeviceCredentials, DeviceCredentials.of({
    authenticate: (id) => Effect.sync(() => void calls.push(id)).pipe(Effect.andThen(Effect.die("credential check reached"))),
    identify: () => Effect.sync(() => void calls.push("identify")).pipe(Effect.andThen(Effect.die("credential check reached"))),
    issue: () => Effect.die("not used"),
    revoke: () => Effect.die("not used")
  }))

const failingCredentials = Layer.succeed(DeviceCredentials, DeviceCredentials.of({
  authenticate: () => Effect.fail(new CredentialStoreFailed({ operation: "authenticate" })),
  identify: () => Effect.fail(new CredentialStoreFailed({ operation: "authenticate" })),
  issue: () => Effect.die("not used"),
  revoke: () => Effect.die("not used")
}))

const server = (credentials: Layer.Layer<DeviceCredentials> = memoryCredentials) =>
  GatewayServer.layer({
    host: "127.0.0.1",
    port: 0,
    publicUrl: "https://core.example/base",
    heartbeatSeconds: 20
  }).pipe(Layer.provide(credentials))

interface Answer {
  readonly status: number
  readonly body: unknown
}

const request = (path: string, init: RequestInit = {}) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* GatewayServer
    return yield* Effect.promise(async (): Promise<Answer> => {
      const response = await fetch(`${baseUrl}${path}`, init)
      const text = await response.text()
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {
        // keep the text
      }
      return { status: response.status, body }
    })
  })

/** `authorization: null` sends no Authorization header. */
const bootstrap = (body: string, authorization: string | null = `Bearer ${CREDENTIAL}`, extra: Record<string, string> = {}) =>
  request("/api/v1/agent-daemon/bootstrap", {
    method: "POST",
    headers: { "content-type": "application/json", ...(authorization === null ? {} : { authorization }), ...extra },
    body
  })

const refused = (status: number, error: string, detail?: string) => ({ status, error, detail })
const asRefusal = (answer: Answer | UpgradeRefused) => {
  const body = answer.body as { error?: string; detail?: string }
  return { status: answer.status, error: body.error, detail: body.detail }
}

const upgrade = (options: { deviceId?: string; version?: string; credential?: string; authorization?: string }) =>
  Effect.gen(function*() {
    const { wsUrl } = yield* GatewayServer
    const { port } = yield* GatewayServer
    // The public ws_url points at core.example; dial the bound loopback address with the same path.
    const local = wsUrl.replace(/^wss:\/\/core\.example\/base/, `ws://127.0.0.1:${port}`)
    return yield* dial({ wsUrl: local, ...options })
  })

describe("bootstrap", () => {
  it.effect("returns the device, its workspace and the ws_url of the configured public URL, never the request's host", () =>
    Effect.gen(function*() {
      const answer = yield* bootstrap(JSON.stringify({ device_id: "dev-1", extra: true }), `Bearer ${CREDENTIAL}`, {
        "x-forwarded-host": "evil.example",
        "x-forwarded-proto": "http"
      })
      assert.deepStrictEqual(answer, {
        status: 200,
        body: {
          device_id: "dev-1",
          workspace_id: "ws-1",
          ws_url: "wss://core.example/base/api/v1/agent-daemon/ws",
          heartbeat_seconds: 20,
          protocol_version: Version.ProtocolVersion
        }
      })
    }).pipe(Effect.provide(server())))

  it.effect("trims whitespace around the Bearer token", () =>
    Effect.gen(function*() {
      const answer = yield* bootstrap(JSON.stringify({ device_id: "dev-1" }), `Bearer   ${CREDENTIAL}  `)
      assert.strictEqual(answer.status, 200)
    }).pipe(Effect.provide(server())))

  it.effect("answers 405 method_not_allowed with an empty detail to any method but POST", () =>
    Effect.gen(function*() {
      const answer = yield* request("/api/v1/agent-daemon/bootstrap", { headers: { authorization: `Bearer ${CREDENTIAL}` } })
      assert.deepStrictEqual(answer, { status: 405, body: { error: "method_not_allowed", detail: "" } })
    }).pipe(Effect.provide(server())))

  it.effect("answers 401 missing_bearer without a usable Bearer header", () =>
    Effect.gen(function*() {
      const body = JSON.stringify({ device_id: "dev-1" })
      for (const authorization of [null, `Basic ${CREDENTIAL}`, `bearer ${CREDENTIAL}`, "Bearer    ", CREDENTIAL]) {
        const answer = yield* bootstrap(body, authorization)
        assert.deepStrictEqual(asRefusal(answer).error, "missing_bearer", JSON.stringify(answer))
        assert.strictEqual(answer.status, 401)
      }
    }).pipe(Effect.provide(server())))

  it.effect("answers 400 bad_json for a body that is not a JSON object with a string device_id", () =>
    Effect.gen(function*() {
      for (const body of ["not json", "[]", "\"dev-1\"", JSON.stringify({ device_id: 5 })]) {
        const answer = yield* bootstrap(body)
        assert.deepStrictEqual([answer.status, asRefusal(answer).error], [400, "bad_json"], body)
      }
    }).pipe(Effect.provide(server())))

  it.effect("answers 400 missing_device_id without a device id", () =>
    Effect.gen(function*() {
      for (const body of ["{}", JSON.stringify({ device_id: "" }), "null"]) {
        const answer = yield* bootstrap(body)
        assert.deepStrictEqual([answer.status, asRefusal(answer).error], [400, "missing_device_id"], body)
      }
    }).pipe(Effect.provide(server())))

  it.effect("answers an unknown device exactly as a wrong credential (no enumeration); the log keeps the reason", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const cases: ReadonlyArray<[string, string, number, string]> = [
        ["dev-unknown", CREDENTIAL, 401, "bad_credential"],
        ["x".repeat(200), CREDENTIAL, 401, "bad_credential"],
        ["dev-1", "awdc_wrong", 401, "bad_credential"],
        ["dev-1", OTHER_CREDENTIAL, 401, "bad_credential"],
        ["dev-sandbox", "awdc_sandbox-credential", 403, "wrong_runtime_type"]
      ]
      const bodies = new Set<string>()
      for (const [id, credential, status, error] of cases) {
        const answer = yield* bootstrap(JSON.stringify({ device_id: id }), `Bearer ${credential}`)
        assert.deepStrictEqual([answer.status, asRefusal(answer).error], [status, error], id)
        if (status === 401) bodies.add(JSON.stringify(answer.body))
      }
      assert.strictEqual(bodies.size, 1, "every 401 body is byte-identical")
      assert.isTrue(logs.lines.some((line) => line.includes("unknown_device") && line.includes("dev-unknown")))
    }).pipe(Effect.provide(server().pipe(Layer.provideMerge(logs.layer))))
  })

  it.effect("refuses a credential without the daemon form before reading the body, and logs no raw control character", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      // The body is not JSON: a malformed credential is refused before the body is looked at.
      const answer = yield* bootstrap("not json", "Bearer x")
      assert.deepStrictEqual([answer.status, asRefusal(answer).error], [401, "bad_credential"])
      const controlled = yield* bootstrap(JSON.stringify({ device_id: "dev\u001b[31m\nforged" }), `Bearer ${CREDENTIAL}`)
      assert.deepStrictEqual([controlled.status, asRefusal(controlled).error], [401, "bad_credential"])
      assert.isTrue(logs.lines.some((line) => line.includes("malformed_credential")))
      // eslint-disable-next-line no-control-regex
      assert.deepStrictEqual(logs.lines.filter((line) => /[\u0000-\u001f]/.test(JSON.parse(line).annotations?.device_id ?? "")), [])
    }).pipe(Effect.provide(server().pipe(Layer.provideMerge(logs.layer))))
  })

  it.effect("checks the whole credential before the body: a credential no device holds is 401 whatever the body", () =>
    Effect.gen(function*() {
      for (const body of ["not json", "{}", JSON.stringify({ device_id: "dev-1" })]) {
        const answer = yield* bootstrap(body, "Bearer awdc_held-by-no-device")
        assert.deepStrictEqual([answer.status, asRefusal(answer).error], [401, "bad_credential"], body)
      }
      // A valid credential with a body that does not parse is the body's fault.
      const valid = yield* bootstrap("not json")
      assert.deepStrictEqual([valid.status, asRefusal(valid).error], [400, "bad_json"])
    }).pipe(Effect.provide(server())))

  it.effect("never accepts a Project API key or the Core key as a daemon credential", () =>
    Effect.gen(function*() {
      for (const key of ["awp_project-api-key-0123", "sk-proj-0123456789", "core-key-0123456789"]) {
        const answer = yield* bootstrap(JSON.stringify({ device_id: "dev-1" }), `Bearer ${key}`)
        assert.deepStrictEqual([answer.status, asRefusal(answer).error], [401, "bad_credential"])
        assert.isFalse(JSON.stringify(answer.body).includes(key))
      }
    }).pipe(Effect.provide(server())))

  it.effect("answers 500 internal when the credential store fails, logging the failure but never the credential", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const answer = yield* bootstrap(JSON.stringify({ device_id: "dev-1" }))
      assert.deepStrictEqual(asRefusal(answer), refused(500, "internal", "credential check failed"))
      assert.isFalse(JSON.stringify(answer.body).includes(CREDENTIAL))
      assert.isTrue(logs.lines.some((line) => line.includes("store failed (authenticate)")))
      assert.deepStrictEqual(logs.lines.filter((line) => line.includes(CREDENTIAL)), [])
    }).pipe(Effect.provide(server(failingCredentials).pipe(Layer.provideMerge(logs.layer))))
  })
})

describe("device-status", () => {
  it.effect("reports whether the device holds a live connection, with no owner lease", () =>
    Effect.gen(function*() {
      const status = () =>
        request("/api/v1/agent-daemon/device-status?device_id=dev-1", { headers: { authorization: `Bearer ${CREDENTIAL}` } })
      assert.deepStrictEqual(yield* status(), { status: 200, body: { device_id: "dev-1", online: false, owner: null } })
      yield* Effect.scoped(Effect.gen(function*() {
        const connected = yield* nextEvent("dev-1", "Connected")
        const runtime = yield* upgrade({ deviceId: "dev-1", credential: CREDENTIAL })
        assert.isFalse("_tag" in runtime)
        yield* Fiber.join(connected)
        assert.deepStrictEqual(yield* status(), { status: 200, body: { device_id: "dev-1", online: true, owner: null } })
      }))
    }).pipe(Effect.provide(server())))

  it.effect("answers 401 missing_bearer, 400 missing_device_id and the authentication errors", () =>
    Effect.gen(function*() {
      const path = "/api/v1/agent-daemon/device-status"
      assert.deepStrictEqual(asRefusal(yield* request(`${path}?device_id=dev-1`)).error, "missing_bearer")
      const noDevice = yield* request(path, { headers: { authorization: `Bearer ${CREDENTIAL}` } })
      assert.deepStrictEqual([noDevice.status, asRefusal(noDevice).error], [400, "missing_device_id"])
      const wrong = yield* request(`${path}?device_id=dev-1`, { headers: { authorization: "Bearer awdc_wrong" } })
      assert.deepStrictEqual([wrong.status, asRefusal(wrong).error], [401, "bad_credential"])
    }).pipe(Effect.provide(server())))
})

/** Subscribes now to the gateway's events and returns a fiber completing with the device's next event of a kind. */
const nextEvent = (id: string, tag: GatewayEvent["_tag"]) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway
    const events = yield* gateway.events
    return yield* Stream.filter(events, (e) => e._tag === tag && e.deviceId === id).pipe(Stream.runHead, Effect.forkScoped)
  })

describe("websocket upgrade", () => {
  it.effect("answers 400 missing_params when device_id, version or the Bearer credential is missing", () =>
    Effect.gen(function*() {
      const missing = [
        { version: Version.ProtocolVersion, credential: CREDENTIAL },
        { deviceId: "dev-1", version: "", credential: CREDENTIAL },
        { deviceId: "dev-1", version: Version.ProtocolVersion },
        { deviceId: "dev-1", version: Version.ProtocolVersion, authorization: "Bearer " }
      ]
      for (const options of missing) {
        const answer = yield* Effect.scoped(upgrade(options))
        assert.deepStrictEqual(asRefusal(answer as UpgradeRefused).status, 400)
        assert.deepStrictEqual(asRefusal(answer as UpgradeRefused).error, "missing_params")
      }
    }).pipe(Effect.provide(server())))

  it.effect("answers 426 incompatible_version before any credential check", () => {
    const calls: Array<string> = []
    return Effect.gen(function*() {
      for (const version of Version.rejectedVersionsFixture.filter((v) => v !== "")) {
        const answer = yield* Effect.scoped(upgrade({ deviceId: "dev-1", version, credential: "anything" }))
        assert.deepStrictEqual(
          asRefusal(answer as UpgradeRefused),
          refused(426, "incompatible_version", `daemon protocol ${version} incompatible with server ${Version.ProtocolVersion}`)
        )
      }
      assert.deepStrictEqual(calls, [])
    }).pipe(Effect.provide(server(recordingCredentials(calls))))
  })

  it.effect("checks 400 before 426 before 401", () =>
    Effect.gen(function*() {
      const noDeviceBadVersion = yield* Effect.scoped(upgrade({ version: "0.9.0", credential: "awdc_wrong" }))
      assert.strictEqual(asRefusal(noDeviceBadVersion as UpgradeRefused).status, 400)
      const badVersionBadCredential = yield* Effect.scoped(upgrade({ deviceId: "dev-1", version: "0.9.0", credential: "awdc_wrong" }))
      assert.strictEqual(asRefusal(badVersionBadCredential as UpgradeRefused).status, 426)
      const badCredential = yield* Effect.scoped(upgrade({ deviceId: "dev-1", credential: "awdc_wrong" }))
      assert.deepStrictEqual(
        [asRefusal(badCredential as UpgradeRefused).status, asRefusal(badCredential as UpgradeRefused).error],
        [401, "bad_credential"]
      )
    }).pipe(Effect.provide(server())))

  it.effect("bounds the echoed version to 64 printable characters", () =>
    Effect.gen(function*() {
      const version = `${"9".repeat(100)}\u0007<script>`
      const answer = asRefusal((yield* Effect.scoped(upgrade({ deviceId: "dev-1", version, credential: CREDENTIAL }))) as UpgradeRefused)
      assert.strictEqual(answer.detail, `daemon protocol ${"9".repeat(64)}... incompatible with server ${Version.ProtocolVersion}`)
      assert.strictEqual(boundedEcho("a\u0000b\u00e9"), "a?b?")
    }).pipe(Effect.provide(server())))

  it.effect("refuses an unknown device as a wrong credential (no enumeration), and another runtime type", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[string, string, number, string]> = [
        ["dev-unknown", CREDENTIAL, 401, "bad_credential"],
        ["dev-1", OTHER_CREDENTIAL, 401, "bad_credential"],
        ["dev-1", "awp_project-api-key", 401, "bad_credential"],
        ["dev-sandbox", "awdc_sandbox-credential", 403, "wrong_runtime_type"]
      ]
      for (const [id, credential, status, error] of cases) {
        const answer = asRefusal((yield* Effect.scoped(upgrade({ deviceId: id, credential }))) as UpgradeRefused)
        assert.deepStrictEqual([answer.status, answer.error], [status, error], id)
      }
      const gateway = yield* Gateway
      assert.deepStrictEqual(yield* gateway.sessions, [])
    }).pipe(Effect.provide(server())))

  it.effect("answers 405 to any method but GET and 400 to a GET without an upgrade", () =>
    Effect.gen(function*() {
      const path = `/api/v1/agent-daemon/ws?device_id=dev-1&version=${Version.ProtocolVersion}`
      const post = yield* request(path, { method: "POST", headers: { authorization: `Bearer ${CREDENTIAL}` } })
      assert.deepStrictEqual(post, { status: 405, body: { error: "method_not_allowed", detail: "" } })
      const plain = yield* request(path, { headers: { authorization: `Bearer ${CREDENTIAL}` } })
      assert.deepStrictEqual([plain.status, asRefusal(plain).error], [400, "missing_params"])
    }).pipe(Effect.provide(server())))

  it.effect("upgrades an authenticated, matching daemon and registers its session", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      yield* Effect.scoped(Effect.gen(function*() {
        const connected = yield* nextEvent("dev-1", "Connected")
        const runtime = yield* upgrade({ deviceId: "dev-1", credential: CREDENTIAL })
        assert.isFalse("_tag" in runtime)
        yield* Fiber.join(connected)
        const session = Option.getOrThrow(yield* gateway.session(deviceId("dev-1")))
        assert.strictEqual(session.deviceId, "dev-1")
      }))
    }).pipe(Effect.provide(server())))
})

describe("credential hygiene", () => {
  it.effect("never writes a credential into a log line or an error body", () => {
    const logs = captureLogs()
    const bodies: Array<string> = []
    return Effect.gen(function*() {
      const keep = (answer: Answer | UpgradeRefused | object) => bodies.push(JSON.stringify("body" in answer ? answer.body : ""))
      keep(yield* bootstrap(JSON.stringify({ device_id: "dev-1" })))
      keep(yield* bootstrap(JSON.stringify({ device_id: "dev-2" })))
      keep(yield* bootstrap("not json"))
      keep(yield* bootstrap(JSON.stringify({ device_id: "dev-unknown" })))
      keep(yield* Effect.scoped(upgrade({ deviceId: "dev-1", version: "0.9.0", credential: CREDENTIAL })))
      keep(yield* Effect.scoped(upgrade({ deviceId: "dev-2", credential: CREDENTIAL })))
      yield* Effect.scoped(Effect.gen(function*() {
        const { port } = yield* GatewayServer
        const disconnected = yield* nextEvent("dev-1", "Disconnected")
        const runtime = yield* dialOk({ wsUrl: `ws://127.0.0.1:${port}/api/v1/agent-daemon/ws`, deviceId: "dev-1", credential: CREDENTIAL })
        yield* runtime.send(heartbeat())
        yield* runtime.sendRaw(`{"type":"bogus","payload":"${CREDENTIAL}"}`)
        yield* runtime.close()
        yield* Fiber.join(disconnected)
      }))
      assert.isTrue(logs.lines.some((line) => line.includes("invalid frame dropped")))
      assert.isTrue(logs.lines.some((line) => line.includes("Sent HTTP response")))
      assert.deepStrictEqual(logs.lines.filter((line) => line.includes(CREDENTIAL)), [])
      assert.deepStrictEqual(bodies.filter((body) => body.includes(CREDENTIAL)), [])
    }).pipe(Effect.provide(server().pipe(Layer.provideMerge(logs.layer))))
  })
})
