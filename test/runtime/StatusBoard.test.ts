/**
 * The StatusBoard's change signal: every kind of change wakes an armed wait (connection, kinds, attach,
 * detach, touch), a wait armed before a change returns even when awaited after it, nothing else wakes it
 * (reads, TestClock advances), and the per-connection modules touch the board where their state moves.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Metric, Scope, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import { TestClock } from "effect/testing"
import { type ConnectionStatus, StatusBoard } from "../../src/runtime/StatusBoard.js"
import {
  adjust,
  cancelFrame,
  connect,
  next,
  prepareFrame,
  prepareReady,
  promptFrame,
  processLayer,
  releaseFrame,
  same,
  script,
  settle,
  startFrame,
  until
} from "../support/runtimeTestWire.js"
import { parsePrometheusText, valueOf } from "../support/prometheusText.js"

const makeBoard = StatusBoard.make({ daemonVersion: "t", wireVersion: "0.10.0", pid: 1, deviceId: "device-1", coreUrl: "http://core" })

const connected: ConnectionStatus = {
  state: "connected",
  device_id: "device-1",
  core_url: "http://core",
  connection_number: 1,
  since_ms: 0
}

const emptyView = { active_runs: 0, admissions: [], executors: [], runs: [], unconfirmed: [] }

/** Whether an armed wait has returned once every runnable fiber had its turn (no time passes). */
const fired = (wait: Effect.Effect<void>) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(wait)
    yield* settle
    const done = fiber.pollUnsafe() !== undefined
    if (!done) yield* Fiber.interrupt(fiber)
    return done
  })

describe("StatusBoard changes", () => {
  it.effect("fires on setConnection, setKinds, attach, detach and touch, one version each", () =>
    Effect.gen(function* () {
      const board = yield* makeBoard
      const scope = yield* Scope.make()
      const actions: ReadonlyArray<readonly [string, Effect.Effect<void>]> = [
        ["setConnection", board.setConnection(connected)],
        ["setKinds", board.setKinds([{ kind: "scripted", available: true, supported: ["streaming"] }])],
        ["attachView", Scope.provide(board.attachView(Effect.succeed(emptyView)), scope)],
        ["detach", Scope.close(scope, Exit.void)],
        ["touch", board.touch]
      ]
      for (const [name, action] of actions) {
        const before = yield* board.changes.version
        const wait = yield* board.changes.arm
        assert.isFalse(yield* fired(wait), `${name}: nothing changed yet`)
        yield* action
        assert.isTrue(yield* fired(wait), `${name} wakes the armed wait`)
        assert.strictEqual(yield* board.changes.version, before + 1, `${name} is one change`)
      }
    }))

  it.effect("a wait armed before a change returns when awaited after it; one change wakes every armed wait", () =>
    Effect.gen(function* () {
      const board = yield* makeBoard
      const first = yield* board.changes.arm
      const second = yield* board.changes.arm
      yield* board.touch
      // Awaited after the change: not missed.
      yield* first
      yield* second
      // Armed after the change: waits for the next one.
      const third = yield* board.changes.arm
      assert.isFalse(yield* fired(third))
      yield* board.setConnection(connected)
      yield* third
    }))

  it.effect("without a change an armed wait does not return, whatever the TestClock does; reads change nothing", () =>
    Effect.gen(function* () {
      const board = yield* makeBoard
      const wait = yield* board.changes.arm
      const fiber = yield* Effect.forkChild(wait)
      yield* TestClock.adjust("1 hour")
      yield* board.snapshot
      yield* settle
      assert.isUndefined(fiber.pollUnsafe())
      assert.strictEqual(yield* board.changes.version, 0)
      yield* board.touch
      yield* Fiber.join(fiber)
    }))
})

describe("StatusBoard view", () => {
  it.effect("a finished Turn's admission is shown finished, never live; a Run shows its admission's request id", () =>
    Effect.gen(function* () {
      const board = yield* StatusBoard
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", script([{ wait: "go" }, { delta: "x" }])))
      yield* until(core, "preparation_status") // starting
      yield* until(core, "preparation_status") // started
      const running = yield* board.snapshot
      same(running.admissions.map((a) => [a.request_id, a.state, a.run_id]), [["prep-1", "running", "run-1"]])
      same(running.runs.map((r) => [r.run_id, r.request_id]), [["run-1", "prep-1"]])
      yield* (yield* ScriptedSignals).fire("go")
      yield* until(core, "done")
      yield* settle
      const finished = yield* board.snapshot
      same(finished.admissions.map((a) => [a.request_id, a.state]), [["prep-1", "finished"]])
      same(finished.runs, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("the snapshot is computed when read, once per change: touches alone compute nothing", () =>
    Effect.gen(function* () {
      const board = yield* makeBoard
      let views = 0
      let counts = 0
      const scope = yield* Scope.make()
      yield* Scope.provide(
        board.attachView(Effect.sync(() => (views++, emptyView)), Effect.sync(() => (counts++, 0))),
        scope
      )
      const before = { views, counts }
      for (let i = 0; i < 5; i++) yield* board.touch
      same({ views: views - before.views, counts: counts - before.counts }, { views: 0, counts: 5 })
      yield* board.snapshot
      yield* board.snapshot
      assert.strictEqual(views - before.views, 1, "two reads after the changes: one computation")
      yield* board.touch
      yield* board.snapshot
      assert.strictEqual(views - before.views, 2, "a change, then a read: computed again")
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("updates streams each new snapshot as a SubscriptionRef", () =>
    Effect.gen(function* () {
      const board = yield* makeBoard
      const seen: Array<string> = []
      const fiber = yield* board.updates.pipe(
        Stream.take(3),
        Stream.runForEach((s) => Effect.sync(() => void seen.push(s.connection.state))),
        Effect.forkChild
      )
      yield* settle
      yield* board.setConnection(connected)
      yield* board.setConnection({ ...connected, state: "backoff" })
      yield* Fiber.join(fiber)
      same(seen, ["starting", "connected", "backoff"])
    }))
})

describe("StatusBoard changes from a connection", () => {
  it.effect("attach, admissions, Runs, cancellation, idle expiry and failed cleanups wake armed waits", () =>
    Effect.gen(function* () {
      const board = yield* StatusBoard
      const armed = board.changes.arm
      // Attaching the view and publishing the declared kinds are changes.
      let wait = yield* armed
      const { core } = yield* connect()
      assert.isTrue(yield* fired(wait), "connection start")

      // An admission (Admission records, Executors reserve): the status is published after the change.
      wait = yield* armed
      yield* core.toRuntime(prepareFrame("prep-1"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "ready")
      assert.isTrue(yield* fired(wait), "preparing, ready")
      same((yield* board.snapshot).admissions.map((a) => a.state), ["ready"])

      // A release returns the Executor to the idle pool.
      wait = yield* armed
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "released")
      assert.isTrue(yield* fired(wait), "released")
      same((yield* board.snapshot).executors.map((e) => e.state), ["idle"])

      // Idle expiry closes the Executor (only the Executor table changes).
      wait = yield* armed
      yield* adjust("10 minutes")
      assert.isTrue(yield* fired(wait), "idle expiry")
      same((yield* board.snapshot).executors, [])

      // A Run that hangs, then its cancellation request (the Run's own state).
      yield* prepareReady(core, "prep-2")
      wait = yield* armed
      yield* core.toRuntime(startFrame("prep-2", "executor-2", "handle-2", "run-1", script([{ hang: true }])))
      yield* until(core, "preparation_status")
      yield* settle
      assert.isTrue(yield* fired(wait), "run started")
      same((yield* board.snapshot).runs.map((r) => [r.run_id, r.state]), [["run-1", "running"]])
      wait = yield* armed
      yield* core.toRuntime(cancelFrame("run-1"))
      yield* settle
      assert.isTrue(yield* fired(wait), "cancellation requested")
    }).pipe(Effect.provide(processLayer())))

  it.effect("each failed cleanup attempt wakes armed waits (ownership records), and so does the confirmation", () =>
    Effect.gen(function* () {
      const board = yield* StatusBoard
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ close_fails: 2 }, { delta: "x" }])))
      yield* until(core, "done")
      yield* adjust(0)
      same((yield* board.snapshot).unconfirmed.map((u) => u.attempts), [1])
      // Only the ownership record moves on a retry that fails again.
      let wait = yield* board.changes.arm
      yield* adjust(499)
      assert.isFalse(yield* fired(wait), "no retry 1 ms before the backoff")
      yield* adjust(1)
      assert.isTrue(yield* fired(wait), "second failed attempt")
      same((yield* board.snapshot).unconfirmed.map((u) => u.attempts), [2])
      wait = yield* board.changes.arm
      yield* adjust(750)
      assert.isTrue(yield* fired(wait), "confirmed")
      same((yield* board.snapshot).unconfirmed, [])
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))
  it.effect("the metrics follow the board: cleanups_unconfirmed while a close is retried, connection_state 1 for the current state (issue #22)", () =>
    Effect.gen(function* () {
      const board = yield* StatusBoard
      const gauge = (name: string, labels: Record<string, string> = {}) =>
        Effect.map(PrometheusMetrics.format(), (text) => valueOf(parsePrometheusText(text), name, labels))
      yield* board.setConnection(connected)
      assert.strictEqual(yield* gauge("agentwire_daemon_connection_state", { state: "connected" }), 1)
      for (const other of ["starting", "connecting", "backoff", "stopped"]) {
        assert.strictEqual(yield* gauge("agentwire_daemon_connection_state", { state: other }), 0, other)
      }
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ close_fails: 2 }, { delta: "x" }])))
      yield* until(core, "done")
      yield* adjust(0)
      assert.strictEqual(yield* gauge("agentwire_daemon_cleanups_unconfirmed"), 1)
      yield* adjust(500) // second failed attempt: still one resource unconfirmed
      assert.strictEqual(yield* gauge("agentwire_daemon_cleanups_unconfirmed"), 1)
      yield* adjust(750) // confirmed
      same((yield* board.snapshot).unconfirmed, [])
      assert.strictEqual(yield* gauge("agentwire_daemon_cleanups_unconfirmed"), 0)
      yield* board.setConnection({ ...connected, state: "backoff" })
      assert.strictEqual(yield* gauge("agentwire_daemon_connection_state", { state: "connected" }), 0)
      assert.strictEqual(yield* gauge("agentwire_daemon_connection_state", { state: "backoff" }), 1)
    }).pipe(Effect.provide(processLayer()), Effect.provideService(Metric.MetricRegistry, new Map())))
})
