import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Messages } from "../../src/proto/index.js"
import type { Harness } from "../../src/runtime/harness/Harness.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { declaration } from "../support/capabilities.js"
import { notAPng, remoteImage, validJpeg } from "../support/runtimeImages.js"
import {
  adjust,
  connect,
  next,
  prepareFrame,
  prepareReady,
  processLayer,
  promptFrame,
  releaseFrame,
  same,
  script,
  silent,
  startFrame,
  text,
  until
} from "../support/runtimeTestWire.js"

const rejected = (operation: string, error_code: string) => ({ revision: 0, state: "rejected", operation, error_code })

const binding = { id: "e4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", workspace_directory: "/workspace", capability_sources: null }

/** The read-only profile (idle workspace reads) for `kind`. */
const readOnlyFrame = (requestId: string, kind: string): Messages.CoreToRuntime => {
  const frame = prepareFrame(requestId, { agent_kind: kind })
  if (frame.type !== "execution_prepare") throw new Error("unreachable")
  const { disable_execution_environment: _a, execution_controls: _b, observe_tool_observations: _c, ...base } = frame.payload.configuration
  return {
    ...frame,
    payload: { ...frame.payload, configuration: { ...base, workspace_read_only: true, local_environment: binding } }
  }
}

/** The frame for a hosted Environment: its binding instead of `disable_execution_environment`. */
const boundFrame = (frame: Messages.CoreToRuntime): Messages.CoreToRuntime => {
  if (frame.type === "execution_prepare") {
    const { disable_execution_environment: _, ...configuration } = frame.payload.configuration
    return { ...frame, payload: { ...frame.payload, configuration: { ...configuration, local_environment: binding } } }
  }
  if (frame.type === "prompt_request") {
    const { disable_execution_environment: _, ...payload } = frame.payload
    return { ...frame, payload: { ...payload, local_environment: binding } }
  }
  throw new Error("unreachable")
}

/**
 * A kind that declares read-only preparations (the scripted one does not: this daemon serves no workspace reads).
 * A read-only admission never reaches the Harness.
 */
const reader: Harness = {
  declaration: { kind: "reader", available: true, capabilities: declaration({ workspace_read_preparation: true, preparation: true }) },
  prepare: () => Effect.die(new Error("a read-only preparation never prepares natively"))
}

describe("Admission", () => {
  it.effect("prepares, starts and completes: preparing, ready, starting, events, started, done", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const { preparing, ready } = yield* prepareReady(core, "prep-1")
      same(preparing, { executor_id: "executor-1", handle: "handle-1", revision: 1, state: "preparing" })
      same(ready, { executor_id: "executor-1", handle: "handle-1", revision: 2, state: "ready", expires_at: 300_000 })
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("hello world")))
      const starting = yield* next(core, "preparation_status")
      same(starting.payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "starting", expires_at: 300_000, run_id: "run-1"
      })
      const frames = yield* until(core, "done")
      const statuses = frames.filter((f) => f.type === "preparation_status")
      same(statuses.map((f) => f.payload), [{
        executor_id: "executor-1", handle: "handle-1", revision: 4, state: "started", expires_at: 300_000, run_id: "run-1"
      }])
      const run = frames.filter((f) => f.type !== "preparation_status")
      same(run, [
        { type: "delta", id: "run-1", payload: { delta: "hello", sequence: 1 } },
        { type: "delta", id: "run-1", payload: { delta: " world", sequence: 2 } },
        {
          type: "done",
          id: "run-1",
          payload: { content: "hello world", metadata: { agent_session_id: "scripted-executor-1", agent_session_type: "scripted" } }
        }
      ])
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("releases before start; the idle Executor is reused with ready revision 1 and no preparation", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      const released = yield* next(core, "preparation_status")
      same(released.payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "released", expires_at: 300_000
      })
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors.map((e) => e.state), ["idle"])
      yield* adjust("1 minute")
      yield* core.toRuntime(prepareFrame("prep-2"))
      const reused = yield* next(core, "preparation_status")
      same(reused.payload, {
        executor_id: "executor-1", reused: true, handle: "handle-2", revision: 1, state: "ready", expires_at: 360_000
      })
      // The old handle's own admission is released: it cannot start the replacement.
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "preparation_not_ready"))
      yield* core.toRuntime(startFrame("prep-2", "executor-1", "handle-2", "run-2", text("x")))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "starting")
      yield* until(core, "done")
    }).pipe(Effect.provide(processLayer())))

  it.effect("expires exactly five minutes after the grant; one millisecond before it is still ready", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* adjust(299_999)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      const expired = yield* next(core, "preparation_status")
      same(expired.payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "expired", expires_at: 300_000
      })
      // Expiry keeps the Executor owned (idle, reusable); a retry does not extend anything.
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors.map((e) => e.state), ["idle"])
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "preparation_not_ready"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("a start one millisecond before expiry is accepted", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* adjust(299_999)
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("x")))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "starting")
      yield* adjust(10)
      const frames = yield* until(core, "done")
      assert.isFalse(frames.some((f) => f.type === "preparation_status" && f.payload.state === "expired"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("rejects at once with preparation_capacity when the active bound is full (never queues)", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(prepareFrame("prep-2", {}, "c0ffee00-1234-4abc-9def-0123456789ab"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "preparation_capacity"))
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer({ maxActive: 1 }))))

  it.effect("an Executor whose close is failing holds capacity until the close is confirmed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ close_fails: 2 }, { delta: "x" }])))
      yield* until(core, "done")
      // The direct Run's Executor is closed after the Turn; the first attempt failed.
      yield* adjust(0)
      const board = yield* StatusBoard
      same((yield* board.snapshot).unconfirmed, [
        { resource: "executor-1", kind: "executor", attempts: 1, last_error: "scripted close failure" }
      ])
      yield* core.toRuntime(prepareFrame("prep-1"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "preparation_capacity"))
      yield* adjust(499)
      assert.strictEqual((yield* board.snapshot).unconfirmed[0]?.attempts, 1)
      yield* adjust(1)
      assert.strictEqual((yield* board.snapshot).unconfirmed[0]?.attempts, 2)
      yield* adjust(750)
      same((yield* board.snapshot).unconfirmed, [])
      same((yield* board.snapshot).executors, [])
      const { ready } = yield* prepareReady(core, "prep-2")
      assert.strictEqual(ready.state, "ready")
    }).pipe(Effect.provide(processLayer({ maxActive: 1 }))))

  it.effect("rejects stale handles, handles of another request id and unknown executors", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-9", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "unknown_preparation"))
      yield* core.toRuntime(startFrame("prep-2", "executor-1", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "unknown_preparation"))
      yield* core.toRuntime(startFrame("prep-1", "executor-9", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "unknown_executor"))
      yield* core.toRuntime(releaseFrame("prep-1", "handle-9"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_release", "unknown_preparation"))
      // Nothing was consumed: the admission is still ready.
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("x")))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "starting")
    }).pipe(Effect.provide(processLayer())))

  it.effect("re-publishes the current status for a duplicate prepare and rejects a conflicting one", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const { ready } = yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(prepareFrame("prep-1"))
      same((yield* next(core, "preparation_status")).payload, ready)
      yield* core.toRuntime(prepareFrame("prep-1", { observe_messages: true }))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "request_conflict"))
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("re-publishes for a duplicate start, rejects a conflicting one, and a release after start only re-publishes", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      const start = startFrame("prep-1", "executor-1", "handle-1", "run-1", script([{ hang: true }]))
      yield* core.toRuntime(start)
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "starting")
      const started = yield* next(core, "preparation_status")
      assert.strictEqual(started.payload.state, "started")
      yield* core.toRuntime(start)
      same((yield* next(core, "preparation_status")).payload, started.payload)
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-2", script([{ hang: true }])))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "start_conflict"))
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      same((yield* next(core, "preparation_status")).payload, started.payload)
      const board = yield* StatusBoard
      same((yield* board.snapshot).runs, [{ run_id: "run-1", request_id: "prep-1", kind: "scripted", executor_id: "executor-1", state: "running" }])
    }).pipe(Effect.provide(processLayer())))

  it.effect("validates the configuration against the declaration before anything native", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const cases: ReadonlyArray<[Parameters<typeof prepareFrame>[1], string]> = [
        [{ strict_resume: false }, "invalid_configuration"],
        [{ run_id: "run-x" }, "invalid_configuration"],
        [{ observe_messages: true }, "unsupported_configuration"],
        [{ agent_kind: "codex" }, "resource_unavailable"]
      ]
      for (const [overrides, code] of cases) {
        yield* core.toRuntime(prepareFrame(`prep-${code}-${JSON.stringify(overrides).length}`, overrides))
        same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", code))
      }
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["message_items"] } }))))

  it.effect("refuses preparation when the kind does not declare it, and when it is unavailable", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "unsupported_preparation"))
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["preparation"] } }))))

  it.effect("refuses a configuration conflict and a busy Executor of the same Session", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(prepareFrame("prep-2"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "resource_unavailable"))
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      yield* next(core, "preparation_status")
      yield* core.toRuntime(prepareFrame("prep-3", { observe_tool_observations: false }))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "configuration_conflict"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("an execution_start image outside the public inline profile is invalid_start before any native call", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      for (const url of [notAPng, remoteImage]) {
        yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", [{ content: [{ type: "input_image", image_url: url }] }]))
        same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "invalid_start"))
      }
      // Nothing was submitted: the admission is still ready and starts with a valid image.
      const image = [{ content: [{ type: "input_text" as const, text: "see " }, { type: "input_image" as const, image_url: validJpeg }] }]
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", image))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "starting")
      const frames = yield* until(core, "done")
      const done = frames.find((f) => f.type === "done")
      assert.strictEqual(done?.type === "done" ? done.payload.content : undefined, "see [image]")
    }).pipe(Effect.provide(processLayer())))

  it.effect("refuses a read-only preparation, a local Environment binding and authoring on the scripted kind before any native work", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(readOnlyFrame("prep-ro", "scripted"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "unsupported_read_preparation"))
      yield* core.toRuntime(boundFrame(prepareFrame("prep-env")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "unsupported_configuration"))
      // Direct Runs with a binding or with authoring are refused the same way (error then done).
      yield* core.toRuntime(boundFrame(promptFrame("run-1", text("x"))))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "unsupported capability: local_environment" } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
      yield* core.toRuntime(promptFrame("run-2", text("x"), { workspace_authoring: true }))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-2", payload: { error: "unsupported capability: workspace_authoring" } },
        { type: "done", id: "run-2", payload: { content: "" } }
      ])
      assert.isTrue(yield* silent(core))
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("admits a read-only preparation that cannot start, for a kind that declares workspace_read_preparation", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(readOnlyFrame("prep-ro", "reader"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      const ready = yield* next(core, "preparation_status")
      assert.strictEqual(ready.payload.state, "ready")
      yield* core.toRuntime(startFrame("prep-ro", "executor-1", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "read_only_preparation"))
      yield* core.toRuntime(releaseFrame("prep-ro", "handle-1"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "released")
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors, [])
      // The read-only profile is checked against the binding like any other configuration.
      const other = readOnlyFrame("prep-other", "reader")
      if (other.type !== "execution_prepare") throw new Error("unreachable")
      yield* core.toRuntime({
        ...other,
        payload: { ...other.payload, configuration: { ...other.payload.configuration, local_environment: { ...binding, workspace_directory: "/elsewhere" } } }
      })
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "invalid_configuration"))
    }).pipe(Effect.provide(processLayer({
      harnesses: [reader],
      environment: { environmentId: binding.id, root: "/workspace", configured: "/workspace", networkAccess: "disabled" }
    }))))

  it.effect("a failed preparation whose close succeeds publishes failed / preparation_failed after the close", () =>
    Effect.gen(function* () {
      const { core, fiber } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { agent_options: { scripted: { prepare: "fail_with_residue" } } }))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: "preparation_failed"
      })
      assert.isTrue(yield* silent(core))
      same((yield* (yield* StatusBoard).snapshot).executors, [])
      assert.isUndefined(fiber.pollUnsafe())
    }).pipe(Effect.provide(processLayer())))

  it.effect("a failed preparation whose close fails reports cleanup unconfirmed at once, holds capacity, then released", () =>
    Effect.gen(function* () {
      const { core, fiber } = yield* connect()
      const board = yield* StatusBoard
      yield* core.toRuntime(prepareFrame("prep-1", { agent_options: { scripted: { prepare: "fail_with_residue", close_fails: 1 } } }))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      // The first close attempt failed: the admission is not left `preparing`; ownership is kept.
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: "executor_cleanup_unconfirmed"
      })
      same((yield* board.snapshot).executors.map((e) => e.state), ["cleanup_unconfirmed"])
      same((yield* board.snapshot).admissions.map((a) => a.state), ["failed"])
      // Capacity stays held (maxActive 1) while the close is retried.
      yield* core.toRuntime(prepareFrame("prep-2", {}, "session-2"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "preparation_capacity"))
      // A repeat of the failed request re-publishes the failed status; nothing else moves before the retry.
      yield* core.toRuntime(prepareFrame("prep-1", { agent_options: { scripted: { prepare: "fail_with_residue", close_fails: 1 } } }))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.error_code, "executor_cleanup_unconfirmed")
      yield* adjust(499)
      assert.isTrue(yield* silent(core))
      // The retry at 500 ms confirms: the confirmed release is published and the capacity returns.
      yield* adjust(1)
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "released"
      })
      same((yield* board.snapshot).executors, [])
      same((yield* board.snapshot).unconfirmed, [])
      yield* core.toRuntime(prepareFrame("prep-2", {}, "session-2"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "ready")
      assert.isUndefined(fiber.pollUnsafe())
    }).pipe(Effect.provide(processLayer({ maxActive: 1 }))))

  it.effect("a failed preparation whose close hangs: preparing at 9.999 s, cleanup unconfirmed at 10 s, released at 10.5 s", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { agent_options: { scripted: { prepare: "fail_with_residue", close_hangs: 1 } } }))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      yield* adjust(9_999)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: "executor_cleanup_unconfirmed"
      })
      yield* adjust(499)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "released"
      })
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("release while preparing stops the preparation and publishes released after the close", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { agent_options: { scripted: { prepare_sleep: "1 minute" } } }))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "released"
      })
      yield* adjust("2 minutes")
      assert.isTrue(yield* silent(core))
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("keeps at most 64 admission records: terminal ones are pruned first, live ones are never displaced", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      for (let i = 1; i <= 64; i++) {
        yield* core.toRuntime(prepareFrame(`prep-${i}`, {}, `session-${i}`))
        yield* next(core, "preparation_status")
        yield* next(core, "preparation_status")
      }
      yield* core.toRuntime(prepareFrame("prep-65", {}, "session-65"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "preparation_capacity"))
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "released")
      yield* core.toRuntime(prepareFrame("prep-65", {}, "session-65"))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "ready")
      // The pruned record is gone: its old handle names nothing any more.
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "unknown_preparation"))
    }).pipe(Effect.provide(processLayer({ maxActive: 100 }))))

  it.effect("closes an idle Executor after the idle expiry, and at once when the idle bound is full", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      yield* next(core, "preparation_status")
      const board = yield* StatusBoard
      yield* adjust(599_999)
      same((yield* board.snapshot).executors.map((e) => e.state), ["idle"])
      yield* adjust(1)
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("an Executor that becomes idle beyond the idle bound is closed instead of retained", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      yield* next(core, "preparation_status")
      yield* adjust(0)
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer({ maxIdleExecutors: 0 }))))

  it.effect("a full idle pool never blocks a new Session: only the active bound rejects, and the total stays within both bounds", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const sessionB = "5c3f2a10-8e4d-4b6a-9c7e-2d1f0e9b8a76"
      const sessionC = "0d4c2a1e-8f3b-4c6d-9e2a-7b5f1c3d9e80"
      yield* prepareReady(core, "prep-a")
      yield* core.toRuntime(releaseFrame("prep-a", "handle-1"))
      yield* next(core, "preparation_status")
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors.map((e) => [e.executor_id, e.state]), [["executor-1", "idle"]])
      // One idle (the bound) and a new Session: admitted (no executor_capacity).
      yield* core.toRuntime(prepareFrame("prep-b", {}, sessionB))
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "ready")
      // Active bound full: preparation_capacity (retryable), whatever the idle pool holds.
      yield* core.toRuntime(prepareFrame("prep-c", {}, sessionC))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "preparation_capacity"))
      // Released beyond the idle bound: closed, not retained.
      yield* core.toRuntime(releaseFrame("prep-b", "handle-2"))
      yield* next(core, "preparation_status")
      yield* adjust(0)
      same((yield* board.snapshot).executors.map((e) => [e.executor_id, e.state]), [["executor-1", "idle"]])
    }).pipe(Effect.provide(processLayer({ maxActive: 1, maxIdleExecutors: 1 }))))

  it.effect("a ready status that cannot be confirmed written within 5 s fails the admission and releases the reservation", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.holdWrites
      yield* core.toRuntime(prepareFrame("prep-1"))
      yield* adjust(4_999) // `preparing` still waiting within its own budget
      yield* adjust(1) // preparing abandoned; `ready` starts its own budget
      yield* adjust(5_000) // ready abandoned: the admission fails (status_delivery_failed)
      yield* core.releaseWrites
      yield* adjust(0)
      same((yield* core.sent).filter((f) => f.type === "preparation_status").map((f) => f.payload), [{
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "failed", expires_at: 305_000, error_code: "status_delivery_failed"
      }])
      yield* next(core, "preparation_status") // consume the failed status seen above
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors.map((e) => e.state), ["idle"])
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("x")))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_start", "preparation_not_ready"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("refuses preparation for an unavailable kind", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1"))
      same((yield* next(core, "preparation_status")).payload, rejected("execution_prepare", "resource_unavailable"))
    }).pipe(Effect.provide(processLayer({ scripted: { available: false } }))))
})
