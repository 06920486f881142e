/**
 * The reconnect loop over in-memory connections: a scripted Connector hands out MemoryTransports (or fails as
 * told) and the TestClock drives every backoff. The Random service is fixed at 0.5 (jitter factor exactly 1)
 * unless a test says otherwise, so delays are exact: 500, 750, 1125, … ms, capped at 30 s.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, Queue, Random, Ref, References, Schedule, Stream } from "effect"
import { TestClock } from "effect/testing"
import { capabilityNames } from "../../../src/proto/Capabilities.js"
import { Ids, type Messages } from "../../../src/proto/index.js"
import type { ConnectionEnd } from "../../../src/runtime/Connection.js"
import * as Daemon from "../../../src/runtime/Daemon.js"
import * as RuntimeProcess from "../../../src/runtime/RuntimeProcess.js"
import { type ConnectionStatus, StatusBoard } from "../../../src/runtime/StatusBoard.js"
import { ConnectFailed, ConnectRejected } from "../../../src/runtime/transport/ConnectError.js"
import { Connector } from "../../../src/runtime/transport/Connector.js"
import { ConnectionInfo, Transport, TransportClosed } from "../../../src/runtime/transport/Transport.js"
import { MemoryTransport } from "../../support/runtimeMemoryTransport.js"

const deviceId = Ids.unsafeMake.deviceId("dev-1")

type Plan =
  | { readonly _tag: "open"; readonly heartbeatSeconds?: number }
  | { readonly _tag: "fail"; readonly error: ConnectRejected | ConnectFailed }

const open: Plan = { _tag: "open" }
const fail = (error: ConnectRejected | ConnectFailed): Plan => ({ _tag: "fail", error })
const networkDown = fail(new ConnectFailed({ phase: "bootstrap", reason: "network", detail: "ECONNREFUSED" }))

/** A fixed Random: every draw is `value`. */
const fixedRandom = (value: number): Random.Random => ({ nextDoubleUnsafe: () => value, nextIntUnsafe: () => 0 })

/** Drains inbound until the connection ends (what the stub Connection.run does), for loop-only tests. */
const drainUntilEnd: Effect.Effect<ConnectionEnd, never, Transport> = Effect.flatMap(Effect.service(Transport), (t) =>
  Stream.runDrain(t.inbound).pipe(
    Effect.match({
      onFailure: (error): ConnectionEnd => ({ _tag: "TransportEnded", error }),
      onSuccess: (): ConnectionEnd => ({ _tag: "TransportEnded", error: new TransportClosed({ reason: "closed_by_peer" }) })
    })
  ))

interface Harness {
  readonly fiber: Fiber.Fiber<void, Daemon.DaemonRejected>
  /** Each connect attempt, in order (its 1-based number). */
  readonly attempts: Queue.Queue<number>
  readonly attemptCount: Effect.Effect<number>
  /** Each opened connection. */
  readonly opened: Queue.Queue<MemoryTransport>
  /** Every published connection status. */
  readonly states: Queue.Queue<ConnectionStatus>
  readonly board: StatusBoard["Service"]
  /** Waits until the loop published `state`; drops earlier states. */
  readonly awaitState: (state: ConnectionStatus["state"]) => Effect.Effect<ConnectionStatus>
}

const start = (
  plans: ReadonlyArray<Plan>,
  options: {
    readonly runConnection?: Daemon.DaemonOptions["runConnection"]
    readonly random?: number
  } = {}
) =>
  Effect.gen(function* () {
    const remaining = [...plans]
    const attempts = yield* Queue.unbounded<number>()
    const count = yield* Ref.make(0)
    const opened = yield* Queue.unbounded<MemoryTransport>()
    const states = yield* Queue.unbounded<ConnectionStatus>()
    const inner = yield* StatusBoard.make({ daemonVersion: "t", wireVersion: "0.10.0", pid: 1, deviceId, coreUrl: "http://core" })
    const board = StatusBoard.of({
      ...inner,
      setConnection: (s) => inner.setConnection(s).pipe(Effect.andThen(Queue.offer(states, s)), Effect.asVoid)
    })
    const connector = Connector.of({
      connect: Effect.gen(function* () {
        const n = yield* Ref.updateAndGet(count, (c) => c + 1)
        yield* Queue.offer(attempts, n)
        const plan = remaining.shift() ?? open
        if (plan._tag === "fail") return yield* plan.error
        const core = yield* MemoryTransport.make
        yield* Queue.offer(opened, core)
        return {
          transport: core.transport,
          heartbeatInterval: Duration.seconds(plan.heartbeatSeconds ?? 15),
          coreVersion: "0.10.0"
        }
      })
    })
    const fiber = yield* Daemon.run({
      deviceId,
      coreOrigin: "http://core",
      ...(options.runConnection === undefined ? {} : { runConnection: options.runConnection })
    }).pipe(
      Effect.provideService(Connector, connector),
      Effect.provideService(StatusBoard, board),
      Effect.provide(RuntimeProcess.layer({})),
      Effect.provideService(Random.Random, fixedRandom(options.random ?? 0.5)),
      Effect.forkChild
    )
    const awaitState = (state: ConnectionStatus["state"]): Effect.Effect<ConnectionStatus> =>
      Effect.flatMap(Queue.take(states), (s) => (s.state === state ? Effect.succeed(s) : awaitState(state))).pipe(
        Effect.tap(() => Effect.yieldNow)
      )
    return { fiber, attempts, attemptCount: Ref.get(count), opened, states, board, awaitState } satisfies Harness
  })

/** Asserts the next connect attempt comes exactly `ms` after the loop entered backoff. */
const expectRetryAfter = (h: Harness, ms: number) =>
  Effect.gen(function* () {
    const backoff = yield* h.awaitState("backoff")
    assert.strictEqual(backoff.next_attempt_ms! - backoff.since_ms, ms)
    const before = yield* h.attemptCount
    yield* TestClock.adjust(Duration.millis(ms - 1))
    assert.strictEqual(yield* h.attemptCount, before, `no attempt 1 ms before ${ms} ms`)
    yield* TestClock.adjust("1 millis")
    assert.strictEqual(yield* Queue.take(h.attempts), before + 1)
  })

describe("Daemon.run", () => {
  it.effect("connects, provides ConnectionInfo, and publishes connecting then connected", () =>
    Effect.gen(function* () {
      const infos = yield* Queue.unbounded<{ readonly n: number; readonly hb: Duration.Duration }>()
      const h = yield* start([{ _tag: "open", heartbeatSeconds: 9 }], {
        runConnection: Effect.gen(function* () {
          const info = yield* ConnectionInfo
          yield* Queue.offer(infos, { n: info.connectionNumber, hb: info.heartbeatInterval })
          return yield* drainUntilEnd
        })
      })
      assert.deepStrictEqual(yield* Queue.take(infos), { n: 1, hb: Duration.seconds(9) })
      const connecting = yield* Queue.take(h.states)
      assert.deepStrictEqual(connecting, {
        state: "connecting",
        device_id: "dev-1",
        core_url: "http://core",
        connection_number: 1,
        since_ms: 0
      })
      assert.strictEqual((yield* Queue.take(h.states)).state, "connected")
      yield* Fiber.interrupt(h.fiber)
      assert.strictEqual((yield* h.board.snapshot).connection.state, "stopped")
    }))

  it.effect("reconnects after a transient failure with 500 ms, 750 ms, 1125 ms… of backoff", () =>
    Effect.gen(function* () {
      const h = yield* start([networkDown, networkDown, networkDown, networkDown], { runConnection: drainUntilEnd })
      assert.strictEqual(yield* Queue.take(h.attempts), 1)
      yield* expectRetryAfter(h, 500)
      yield* expectRetryAfter(h, 750)
      yield* expectRetryAfter(h, 1125)
      yield* expectRetryAfter(h, 1688)
      const core = yield* Queue.take(h.opened)
      assert.strictEqual((yield* h.awaitState("connected")).connection_number, 5)
      yield* core.close(1011)
      yield* expectRetryAfter(h, 2531)
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("logs each reconnect at info with the attempt number and the delay, and a lost connection as a warning", () => {
    const lines: Array<{ readonly level: string; readonly message: unknown; readonly annotations: Record<string, unknown> }> = []
    const capture = Layer.merge(
      Logger.layer([Logger.make((options) => {
        const message = Array.isArray(options.message) ? options.message.join(" ") : options.message
        lines.push({ level: options.logLevel, message, annotations: { ...options.fiber.getRef(References.CurrentLogAnnotations) } })
      })]),
      Layer.succeed(References.MinimumLogLevel, "All")
    )
    const reconnects = () =>
      lines.filter((l) => l.message === "reconnecting after backoff").map((l) => [l.level, l.annotations.attempt, l.annotations.delay_ms])
    return Effect.gen(function* () {
      const h = yield* start([networkDown, networkDown], { runConnection: drainUntilEnd })
      assert.strictEqual(yield* Queue.take(h.attempts), 1)
      yield* expectRetryAfter(h, 500)
      yield* expectRetryAfter(h, 750)
      const core = yield* Queue.take(h.opened)
      yield* h.awaitState("connected")
      yield* core.close(1011)
      yield* expectRetryAfter(h, 1125)
      assert.deepStrictEqual(reconnects(), [["Info", 2, 500], ["Info", 3, 750], ["Info", 4, 1125]])
      const failed = lines.filter((l) => l.message === "connecting to Core failed")
      assert.deepStrictEqual(failed.map((l) => l.level), ["Warn", "Warn"])
      const ended = lines.find((l) => l.message === "connection to Core ended")!
      assert.deepStrictEqual([ended.level, ended.annotations.close_code], ["Warn", 1011])
      yield* Fiber.interrupt(h.fiber)
    }).pipe(Effect.provide(capture))
  })

  it.effect("records the last error and the next attempt time while in backoff", () =>
    Effect.gen(function* () {
      const h = yield* start([networkDown], { runConnection: drainUntilEnd })
      const backoff = yield* h.awaitState("backoff")
      assert.deepStrictEqual(backoff, {
        state: "backoff",
        device_id: "dev-1",
        core_url: "http://core",
        connection_number: 1,
        since_ms: 0,
        last_error: "bootstrap failed (network: ECONNREFUSED)",
        next_attempt_ms: 500
      })
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("caps the backoff at 30 s", () =>
    Effect.gen(function* () {
      const h = yield* start(Array.from({ length: 14 }, () => networkDown), { runConnection: drainUntilEnd })
      yield* Queue.take(h.attempts)
      const expected = [500, 750, 1125, 1688, 2531, 3797, 5695, 8543, 12814, 19222, 28833, 30000, 30000]
      for (const ms of expected) yield* expectRetryAfter(h, ms)
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("jitters each delay by up to ±20 % from the Random service", () =>
    Effect.gen(function* () {
      const low = yield* start([networkDown, networkDown], { runConnection: drainUntilEnd, random: 0 })
      yield* Queue.take(low.attempts)
      yield* expectRetryAfter(low, 400)
      yield* expectRetryAfter(low, 600)
      yield* Fiber.interrupt(low.fiber)
      const high = yield* start([networkDown], { runConnection: drainUntilEnd, random: 0.999999 })
      yield* Queue.take(high.attempts)
      yield* expectRetryAfter(high, 600)
      yield* Fiber.interrupt(high.fiber)
    }))

  it.effect("the backoff schedule is deterministic for a seeded Random", () =>
    Effect.gen(function* () {
      const delays = Effect.gen(function* () {
        const step = yield* Schedule.toStep(Daemon.backoffSchedule(Daemon.defaultReconnectPolicy))
        const out: Array<number> = []
        for (let i = 0; i < 5; i++) out.push(Duration.toMillis((yield* step(0, undefined))[1]))
        return out
      })
      const a = yield* delays.pipe(Random.withSeed("agentwire"))
      const b = yield* delays.pipe(Random.withSeed("agentwire"))
      assert.deepStrictEqual(a, b)
      const bases = [500, 750, 1125, 1687.5, 2531.25]
      a.forEach((d, i) => assert.isTrue(d >= bases[i]! * 0.8 - 1 && d <= bases[i]! * 1.2 + 1, `delay ${i}: ${d}`))
    }))

  it.effect("a connection that stayed up 30 s resets the backoff; a shorter one does not", () =>
    Effect.gen(function* () {
      const h = yield* start([networkDown, networkDown, open, open], { runConnection: drainUntilEnd })
      yield* Queue.take(h.attempts)
      yield* expectRetryAfter(h, 500)
      yield* expectRetryAfter(h, 750)
      const short = yield* Queue.take(h.opened)
      yield* h.awaitState("connected")
      yield* TestClock.adjust("29999 millis")
      yield* short.close(1011)
      yield* expectRetryAfter(h, 1125)
      const long = yield* Queue.take(h.opened)
      yield* h.awaitState("connected")
      yield* TestClock.adjust("30 seconds")
      yield* long.close(1011)
      yield* expectRetryAfter(h, 500)
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("426 stops at once with the operator message and never reconnects", () =>
    Effect.gen(function* () {
      const h = yield* start([
        fail(new ConnectRejected({ phase: "upgrade", status: 426, code: "incompatible_version", core_version: "0.11.0" }))
      ])
      const error = yield* Effect.flip(Fiber.join(h.fiber))
      assert.deepStrictEqual(
        error,
        new Daemon.DaemonRejected({
          reason: "incompatible_version",
          device_id: "dev-1",
          status: 426,
          code: "incompatible_version",
          core_version: "0.11.0"
        })
      )
      assert.strictEqual(
        error.message,
        "incompatible_version: this daemon speaks wire 0.10.0, Core speaks 0.11.0 (HTTP 426) — deploy matching versions of the daemon and Core; not reconnecting"
      )
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* h.attemptCount, 1)
      const status = (yield* h.board.snapshot).connection
      assert.strictEqual(status.state, "stopped")
      assert.strictEqual(status.last_error, error.message)
    }))

  it.effect("401 and 403 stop with an operator message naming the credential or the device", () =>
    Effect.gen(function* () {
      const unauthorized = yield* start([fail(new ConnectRejected({ phase: "bootstrap", status: 401, code: "bad_credential" }))])
      const e401 = yield* Effect.flip(Fiber.join(unauthorized.fiber))
      assert.strictEqual(e401.reason, "unauthorized")
      assert.include(e401.message, "bad_credential")
      assert.include(e401.message, "check the credential")
      const forbidden = yield* start([fail(new ConnectRejected({ phase: "upgrade", status: 403 }))])
      const e403 = yield* Effect.flip(Fiber.join(forbidden.fiber))
      assert.strictEqual(e403.reason, "forbidden")
      assert.include(e403.message, "HTTP 403")
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* unauthorized.attemptCount, 1)
      assert.strictEqual(yield* forbidden.attemptCount, 1)
    }))

  it.effect("close code 4001 (runtime retired) stops without reconnecting", () =>
    Effect.gen(function* () {
      const h = yield* start([open], { runConnection: drainUntilEnd })
      const core = yield* Queue.take(h.opened)
      yield* core.close(4001)
      const error = yield* Effect.flip(Fiber.join(h.fiber))
      assert.deepStrictEqual(error, new Daemon.DaemonRejected({ reason: "runtime_retired", device_id: "dev-1", code: "4001" }))
      assert.include(error.message, "4001")
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* h.attemptCount, 1)
    }))

  it.effect("other close codes and a dropped connection are transient", () =>
    Effect.gen(function* () {
      const h = yield* start([open, open], { runConnection: drainUntilEnd })
      yield* Queue.take(h.attempts)
      const first = yield* Queue.take(h.opened)
      yield* first.close(1001)
      const backoff = yield* h.awaitState("backoff")
      assert.strictEqual(backoff.last_error, "connection closed (closed_by_peer, code 1001)")
      yield* TestClock.adjust("500 millis")
      assert.strictEqual(yield* Queue.take(h.attempts), 2)
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("device_shutdown (ShutdownRequested) ends the loop successfully", () =>
    Effect.gen(function* () {
      const h = yield* start([open], { runConnection: Effect.succeed<ConnectionEnd>({ _tag: "ShutdownRequested" }) })
      assert.deepStrictEqual(yield* Fiber.await(h.fiber), Exit.void)
      assert.strictEqual((yield* h.board.snapshot).connection.state, "stopped")
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* h.attemptCount, 1)
    }))

  it.effect("does not reconnect before the connection's cleanup is confirmed", () =>
    Effect.gen(function* () {
      const cleanup = yield* Deferred.make<void>()
      const cleaning = yield* Deferred.make<void>()
      const h = yield* start([open, open], {
        runConnection: Effect.scoped(
          Effect.gen(function* () {
            yield* Effect.addFinalizer(() => Deferred.succeed(cleaning, undefined).pipe(Effect.andThen(Deferred.await(cleanup))))
            return yield* drainUntilEnd
          })
        )
      })
      yield* Queue.take(h.attempts)
      const first = yield* Queue.take(h.opened)
      yield* h.awaitState("connected")
      yield* first.close(1006)
      yield* Deferred.await(cleaning)
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual(yield* h.attemptCount, 1)
      assert.strictEqual((yield* h.board.snapshot).connection.state, "connected")
      yield* Deferred.succeed(cleanup, undefined)
      yield* expectRetryAfter(h, 500)
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("each connection gets a fresh transport and the next connection number", () =>
    Effect.gen(function* () {
      const numbers = yield* Queue.unbounded<number>()
      const h = yield* start([open, open], {
        runConnection: Effect.gen(function* () {
          yield* Queue.offer(numbers, (yield* ConnectionInfo).connectionNumber)
          return yield* drainUntilEnd
        })
      })
      const first = yield* Queue.take(h.opened)
      assert.strictEqual(yield* Queue.take(numbers), 1)
      yield* first.close(1011)
      yield* TestClock.adjust("500 millis")
      const second = yield* Queue.take(h.opened)
      assert.strictEqual(yield* Queue.take(numbers), 2)
      assert.notStrictEqual(first, second)
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("publishes the declared kinds from each heartbeat the connection wrote", () =>
    Effect.gen(function* () {
      const capabilities = Object.fromEntries(capabilityNames.map((n) => [n, n === "streaming" || n === "usage"])) as Record<
        (typeof capabilityNames)[number],
        boolean
      >
      const heartbeat: Messages.RuntimeToCore = {
        type: "heartbeat",
        payload: {
          ts: 0,
          active_requests: 0,
          supported_agent_kinds: [{ kind: "scripted", available: true, version: "1.0.0", capabilities }]
        }
      }
      const h = yield* start([open], {
        runConnection: Effect.gen(function* () {
          const transport = yield* Transport
          yield* Effect.orDie(transport.send(heartbeat))
          return yield* drainUntilEnd
        })
      })
      const core = yield* Queue.take(h.opened)
      assert.strictEqual((yield* core.fromRuntime).type, "heartbeat")
      assert.deepStrictEqual((yield* h.board.snapshot).kinds, [
        { kind: "scripted", available: true, version: "1.0.0", supported: ["streaming", "usage"] }
      ])
      yield* Fiber.interrupt(h.fiber)
    }))

  it.effect("a reconnect replays nothing: the next connection carries only heartbeats (real Connection.run)", () =>
    Effect.gen(function* () {
      const h = yield* start([open, open])
      const first = yield* Queue.take(h.opened)
      yield* first.toRuntime({ type: "prompt_cancel", id: Ids.unsafeMake.runId("run-1"), payload: {} })
      yield* first.close(1011)
      yield* h.awaitState("backoff")
      yield* TestClock.adjust("500 millis")
      const second = yield* Queue.take(h.opened)
      yield* h.awaitState("connected")
      yield* TestClock.adjust("14999 millis")
      // A fresh connection sends its heartbeat at once and nothing else until the next heartbeat is due.
      assert.deepStrictEqual((yield* second.sent).map((m) => m.type), ["heartbeat"])
      yield* Fiber.interrupt(h.fiber)
    }))
})
