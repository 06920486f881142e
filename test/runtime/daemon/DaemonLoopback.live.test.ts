/**
 * The whole loop over real loopback HTTP and WebSocket: the production Connector (bootstrap + dial), the real
 * Connection.run and RuntimeProcess layer, against the scripted fake Core. Backoff and heartbeat timers run on
 * the TestClock (Random fixed at 0.5, so delays are exact); I/O is synchronized through the fake Core's queues.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Queue, Random, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { Ids } from "../../../src/proto/index.js"
import * as Daemon from "../../../src/runtime/Daemon.js"
import * as RuntimeProcess from "../../../src/runtime/RuntimeProcess.js"
import { type ConnectionStatus, StatusBoard } from "../../../src/runtime/StatusBoard.js"
import { Connector } from "../../../src/runtime/transport/Connector.js"
import { FakeCore, reply } from "../../support/runtimeFakeCore.js"

const deviceId = Ids.unsafeMake.deviceId("dev-loop")

const startDaemon = (apiBase: string) =>
  Effect.gen(function* () {
    const states = yield* Queue.unbounded<ConnectionStatus>()
    const inner = yield* StatusBoard.make({ daemonVersion: "0.1.0", wireVersion: "0.10.0", pid: 1, deviceId, coreUrl: apiBase })
    const board = StatusBoard.of({
      ...inner,
      setConnection: (s) => inner.setConnection(s).pipe(Effect.andThen(Queue.offer(states, s)), Effect.asVoid)
    })
    const fiber = yield* Daemon.run({ deviceId, coreOrigin: apiBase }).pipe(
      Effect.provide(
        Connector.layer({
          apiBase,
          deviceId,
          credential: Redacted.make("cred-LOOP"),
          userAgent: "agentwire/test",
          transport: { livenessTimeout: false }
        })
      ),
      Effect.provideService(StatusBoard, board),
      Effect.provide(RuntimeProcess.layer({})),
      Effect.provideService(Random.Random, { nextDoubleUnsafe: () => 0.5, nextIntUnsafe: () => 0 }),
      Effect.forkChild
    )
    const awaitState = (state: ConnectionStatus["state"]): Effect.Effect<ConnectionStatus> =>
      Effect.flatMap(Queue.take(states), (s) => (s.state === state ? Effect.succeed(s) : awaitState(state))).pipe(
        Effect.tap(() => Effect.yieldNow)
      )
    return { fiber, awaitState }
  })

describe("Daemon over loopback", () => {
  it.effect("bootstrap 500 and a dropped socket reconnect at exactly 500 ms and 750 ms; the reconnect replays nothing", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      yield* core.scriptBootstrap(reply.bootstrapError(500, "internal"))
      const daemon = yield* startDaemon(core.apiBase)
      assert.strictEqual((yield* core.nextRequest).route, "bootstrap")
      yield* daemon.awaitState("backoff")
      yield* TestClock.adjust("499 millis")
      assert.strictEqual((yield* core.requests).length, 1)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* core.nextRequest).route, "bootstrap")
      assert.strictEqual((yield* core.nextRequest).route, "upgrade")
      const first = yield* core.nextConnection
      assert.strictEqual((yield* first.received).type, "heartbeat")
      // Work that Core started on the first connection must not reappear on the next one.
      yield* first.send({ type: "prompt_cancel", id: Ids.unsafeMake.runId("run-1"), payload: {} })
      yield* first.terminate
      yield* daemon.awaitState("backoff")
      yield* TestClock.adjust("749 millis")
      assert.strictEqual((yield* core.requests).length, 3)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* core.nextRequest).route, "bootstrap")
      assert.strictEqual((yield* core.nextRequest).route, "upgrade")
      const second = yield* core.nextConnection
      assert.strictEqual((yield* second.received).type, "heartbeat")
      yield* daemon.awaitState("connected")
      // Frames are ordered: anything replayed would arrive before the next heartbeat, due 15 s later.
      yield* TestClock.adjust("14999 millis")
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* second.received).type, "heartbeat")
      yield* Fiber.interrupt(daemon.fiber)
      assert.deepStrictEqual(yield* second.closed, { code: 1000, reason: "client closing" })
    }))

  it.effect("a refused connection is retried; a 426 at the upgrade then stops the loop for good", () =>
    Effect.gen(function* () {
      const port = yield* Effect.scoped(Effect.map(FakeCore.make, (c) => c.port))
      const daemon = yield* startDaemon(`http://127.0.0.1:${port}/api/v1`)
      const backoff = yield* daemon.awaitState("backoff")
      assert.strictEqual(backoff.last_error, "bootstrap failed (network: ECONNREFUSED)")
      yield* TestClock.adjust("500 millis")
      const again = yield* daemon.awaitState("backoff")
      assert.strictEqual(again.next_attempt_ms! - again.since_ms, 750)
      yield* Fiber.interrupt(daemon.fiber)

      const core = yield* FakeCore.make
      yield* core.scriptBootstrap({ _tag: "default", protocol_version: "0.12.0" })
      yield* core.scriptUpgrade(reply.upgradeError(426, "incompatible_version"))
      const stopped = yield* startDaemon(core.apiBase)
      const error = yield* Effect.flip(Fiber.join(stopped.fiber))
      assert.strictEqual(error.reason, "incompatible_version")
      assert.include(error.message, "Core speaks 0.12.0")
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual((yield* core.requests).map((r) => r.route), ["bootstrap", "upgrade"])
    }))
})
