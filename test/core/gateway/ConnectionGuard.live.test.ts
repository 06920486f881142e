/**
 * Issue #17, Core under unauthenticated connections, over real loopback TCP sockets (live: Node's own header
 * and request timers run on the wall clock, so small bounds are configured and every assertion waits for an
 * event, never for a duration):
 * - idle sockets beyond the pending cap evict the oldest, and a bootstrap still gets its answer;
 * - an authenticated daemon WebSocket is never evicted;
 * - an idle socket and a slow-header socket are closed by the header timeout, a trickling body by the
 *   request timeout;
 * - a malformed credential, and a well-formed one no device holds, is answered before any body byte is sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, Stream } from "effect"
import { connect, type Socket } from "node:net"
import { DeviceCredentials } from "../../../src/core/DeviceCredentials.js"
import { Gateway } from "../../../src/core/Gateway.js"
import type { ConnectionLimits } from "../../../src/core/server/GatewayHttp.js"
import { GatewayServer } from "../../../src/core/server/GatewayServer.js"
import { deviceId, dialOk, heartbeat, kind } from "../../support/coreScriptedRuntime.js"

const CREDENTIAL = "awdc_guard-credential-0123456789"
const credentials = DeviceCredentials.layerMemory({
  devices: [{ deviceId: "dev-1", workspaceId: "ws-1", runtimeType: "agent-daemon", credential: CREDENTIAL }]
})
const serverWith = (limits: Partial<ConnectionLimits>) =>
  GatewayServer.layer({ host: "127.0.0.1", port: 0, connectionLimits: limits }).pipe(Layer.provide(credentials))

/** A raw TCP socket to the server, open once connected; `closed` resolves when the server ends it. */
interface Raw {
  readonly socket: Socket
  readonly closed: Promise<void>
  readonly received: () => string
}
const open = Effect.fn(function*() {
  const { port } = yield* GatewayServer
  return yield* Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<Raw>((resolve) => {
        let data = ""
        const socket = connect({ host: "127.0.0.1", port })
        socket.on("data", (chunk) => void (data += chunk.toString("utf8")))
        socket.on("error", () => {})
        const closed = new Promise<void>((done) => socket.once("close", () => done()))
        socket.once("connect", () => resolve({ socket, closed, received: () => data }))
      })
    ),
    (raw) => Effect.sync(() => raw.socket.destroy())
  )
})

const bootstrapOk = Effect.gen(function*() {
  const { baseUrl } = yield* GatewayServer
  return yield* Effect.promise(async () => {
    const response = await fetch(`${baseUrl}/api/v1/agent-daemon/bootstrap`, {
      method: "POST",
      headers: { authorization: `Bearer ${CREDENTIAL}`, "content-type": "application/json" },
      body: JSON.stringify({ device_id: "dev-1" })
    })
    return response.status
  })
})

describe("pending-connection cap", () => {
  it.live("evicts the oldest idle sockets beyond the cap; a bootstrap still gets its answer", () =>
    Effect.scoped(Effect.gen(function*() {
      const cap = 8
      const idle: Array<Raw> = []
      for (let i = 0; i < 3 * cap; i++) idle.push(yield* open())
      // The 16 oldest were evicted to make room for the newer ones, in order.
      yield* Effect.promise(() => Promise.all(idle.slice(0, 2 * cap).map((raw) => raw.closed)))
      assert.strictEqual(yield* bootstrapOk, 200)
    }).pipe(Effect.provide(serverWith({ maxPendingConnections: 8 })))))

  it.live("never evicts an authenticated daemon WebSocket", () =>
    Effect.scoped(Effect.gen(function*() {
      const { port } = yield* GatewayServer
      const runtime = yield* dialOk({ wsUrl: `ws://127.0.0.1:${port}/api/v1/agent-daemon/ws`, deviceId: "dev-1", credential: CREDENTIAL })
      const idle: Array<Raw> = []
      for (let i = 0; i < 12; i++) idle.push(yield* open())
      yield* Effect.promise(() => Promise.all(idle.slice(0, 8).map((raw) => raw.closed)))
      // The daemon's connection is still served: its heartbeat becomes the declaration.
      const gateway = yield* Gateway
      const events = yield* gateway.events
      const declared = yield* Stream.filter(events, (e) => e._tag === "Declared").pipe(Stream.runHead, Effect.forkScoped)
      yield* runtime.send(heartbeat([kind("codex")]))
      yield* Fiber.join(declared)
      const session = Option.getOrThrow(yield* gateway.session(deviceId("dev-1")))
      assert.isTrue(Option.isSome(yield* session.declaration))
    }).pipe(Effect.provide(serverWith({ maxPendingConnections: 4 })))))
})

describe("header, request and credential-first bounds", () => {
  const fast = { headersTimeout: Duration.millis(200), requestTimeout: Duration.millis(400), checkInterval: Duration.millis(50) }

  it.live("closes an idle socket and a slow-header socket at the header timeout", () =>
    Effect.scoped(Effect.gen(function*() {
      const idle = yield* open()
      const slow = yield* open()
      slow.socket.write("POST /api/v1/agent-daemon/bootstrap HTTP/1.1\r\nHost: x\r\n")
      yield* Effect.promise(() => Promise.all([idle.closed, slow.closed]))
    }).pipe(Effect.provide(serverWith(fast)))))

  it.live("closes a bootstrap whose body trickles in behind a well-formed credential at the request timeout", () =>
    Effect.scoped(Effect.gen(function*() {
      const raw = yield* open()
      raw.socket.write(
        "POST /api/v1/agent-daemon/bootstrap HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
          `Authorization: Bearer ${CREDENTIAL}\r\nContent-Length: 1000\r\n\r\n{"device_id":`
      )
      yield* Effect.promise(() => raw.closed)
    }).pipe(Effect.provide(serverWith(fast)))))

  it.live("answers a malformed credential 401 bad_credential before any body byte arrives", () =>
    Effect.scoped(Effect.gen(function*() {
      const raw = yield* open()
      const answered = new Promise<void>((resolve) => raw.socket.on("data", () => resolve()))
      raw.socket.write(
        "POST /api/v1/agent-daemon/bootstrap HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
          "Authorization: Bearer x\r\nContent-Length: 1000\r\n\r\n"
      )
      yield* Effect.promise(() => answered)
      assert.match(raw.received(), /^HTTP\/1\.1 401/)
      assert.include(raw.received(), "bad_credential")
    }).pipe(Effect.provide(serverWith({})))))

  it.live("answers a well-formed credential that no device holds 401 before any body byte arrives", () =>
    Effect.scoped(Effect.gen(function*() {
      for (const bearer of ["awdc_not-a-credential-of-any-device", "x"]) {
        const raw = yield* open()
        const answered = new Promise<void>((resolve) => raw.socket.on("data", () => resolve()))
        raw.socket.write(
          "POST /api/v1/agent-daemon/bootstrap HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
            `Authorization: Bearer ${bearer}\r\nContent-Length: 1000\r\n\r\n{"device_id":`
        )
        yield* Effect.promise(() => answered)
        assert.match(raw.received(), /^HTTP\/1\.1 401/, bearer)
        assert.include(raw.received(), "bad_credential")
      }
    }).pipe(Effect.provide(serverWith({})))))
})
