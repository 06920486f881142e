import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type { TurnEvent } from "../../src/runtime/harness/Harness.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import { RefusedEventText } from "../../src/runtime/Runs.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import {
  adjust,
  cancelFrame,
  connect,
  next,
  prepareReady,
  processLayer,
  promptFrame,
  same,
  script,
  settle,
  silent,
  startFrame,
  until
} from "../support/runtimeTestWire.js"
import { eventHarness } from "../support/runtimeEventHarness.js"
import { notAPng, validJpeg } from "../support/runtimeImages.js"

const metadata = (executor: string) => ({ agent_session_id: `scripted-${executor}`, agent_session_type: "scripted" })

const everyEvent = [
  { thinking: "planning" },
  { delta: "Hello", phase: "final_answer" },
  { delta: " there" },
  {
    tool_call: {
      id: "tool-a",
      name: "shell",
      args: { cmd: "ls" },
      result: { ok: true },
      observation: { kind: "command", status: "completed", command: "ls", exit_code: 0 }
    }
  },
  { usage: { tokens: { input_tokens: 10, cached_input_tokens: 0, output_tokens: 2, reasoning_output_tokens: 0, total_tokens: 12 } } },
  { delta: "!" },
  { usage: { tokens: { input_tokens: 20, cached_input_tokens: 5, output_tokens: 4, reasoning_output_tokens: 1, total_tokens: 24 }, model: "m" } }
]

describe("Runs", () => {
  it.effect("prompt_request with every event type and the message and observation opt-ins", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script(everyEvent), { observe_messages: true, observe_tool_observations: true }))
      const frames = yield* until(core, "done")
      same(frames.map((f) => [f.type, "payload" in f ? f.payload : undefined]), [
        ["thinking", { text: "planning", sequence: 1 }],
        ["output_message", { id: "msg_1", status: "in_progress", phase: "final_answer" }],
        ["delta", { item_id: "msg_1", delta: "Hello", sequence: 1 }],
        ["delta", { item_id: "msg_1", delta: " there", sequence: 2 }],
        ["output_message", { id: "msg_1", status: "completed", phase: "final_answer", text: "Hello there" }],
        ["tool_call", {
          id: "tool-a", name: "shell", stage: "before", args: { cmd: "ls" },
          observation: { kind: "command", status: "in_progress", command: "ls", exit_code: 0 }
        }],
        ["tool_call", {
          id: "tool-a", name: "shell", stage: "after", args: { cmd: "ls" }, result: { ok: true },
          observation: { kind: "command", status: "completed", command: "ls", exit_code: 0 }
        }],
        ["usage", { tokens: { input_tokens: 10, cached_input_tokens: 0, output_tokens: 2, reasoning_output_tokens: 0, total_tokens: 12 } }],
        ["output_message", { id: "msg_2", status: "in_progress" }],
        ["delta", { item_id: "msg_2", delta: "!", sequence: 3 }],
        ["output_message", { id: "msg_2", status: "completed", text: "!" }],
        ["usage", { tokens: { input_tokens: 20, cached_input_tokens: 5, output_tokens: 4, reasoning_output_tokens: 1, total_tokens: 24 }, model: "m" }],
        ["done", {
          content: "Hello there!",
          // The final snapshot replaces the previous one; it is never a sum.
          usage: { tokens: { input_tokens: 20, cached_input_tokens: 5, output_tokens: 4, reasoning_output_tokens: 1, total_tokens: 24 }, model: "m" },
          metadata: metadata("executor-1")
        }]
      ])
      assert.isTrue(frames.every((f) => f.type === "heartbeat" || ("id" in f && f.id === "run-1")))
    }).pipe(Effect.provide(processLayer())))

  it.effect("without opt-ins: no output_message, no item_id, no observation, and absent usage stays absent", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const steps = everyEvent.filter((s) => !("usage" in s))
      yield* core.toRuntime(promptFrame("run-1", script(steps)))
      const frames = yield* until(core, "done")
      same(frames.map((f) => [f.type, "payload" in f ? f.payload : undefined]), [
        ["thinking", { text: "planning", sequence: 1 }],
        ["delta", { delta: "Hello", sequence: 1 }],
        ["delta", { delta: " there", sequence: 2 }],
        ["tool_call", { id: "tool-a", name: "shell", stage: "before", args: { cmd: "ls" } }],
        ["tool_call", { id: "tool-a", name: "shell", stage: "after", args: { cmd: "ls" }, result: { ok: true } }],
        ["delta", { delta: "!", sequence: 3 }],
        ["done", { content: "Hello there!", metadata: metadata("executor-1") }]
      ])
    }).pipe(Effect.provide(processLayer())))

  it.effect("an execution error is followed by done; code and http_status come only from the script", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([
        { delta: "partial" },
        { error: { message: "upstream reset", code: "connection_failed", http_status: 502 } },
        { delta: "never" }
      ])))
      const frames = yield* until(core, "done")
      same(frames.map((f) => [f.type, "payload" in f ? f.payload : undefined]), [
        ["delta", { delta: "partial", sequence: 1 }],
        ["error", { error: "upstream reset", code: "connection_failed", http_status: 502 }],
        ["done", { content: "partial", metadata: metadata("executor-1") }]
      ])
      yield* core.toRuntime(promptFrame("run-2", script([{ error: { message: "rate limited (429)" } }])))
      const unclassified = yield* until(core, "done")
      same(unclassified[0], { type: "error", id: "run-2", payload: { error: "rate limited (429)" } })
    }).pipe(Effect.provide(processLayer())))

  it.effect("an invalid script is reported as an error then done, never echoed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ delta: "ok" }, { error: { message: "x", http_status: 502 } }])))
      const frames = yield* until(core, "done")
      same(frames.map((f) => f.type), ["error", "done"])
      same(frames[0], { type: "error", id: "run-1", payload: { error: "invalid script (step 1)" } })
    }).pipe(Effect.provide(processLayer())))

  it.effect("request problems produce error then done on the Run id; an active Run id is ignored", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([]), { agent_kind: "codex" }))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "agent kind not available" } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
      yield* core.toRuntime(promptFrame("run-2", script([]), { observe_messages: true }))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-2", payload: { error: "unsupported capability: message_items" } },
        { type: "done", id: "run-2", payload: { content: "" } }
      ])
      yield* core.toRuntime(promptFrame("run-3", script([{ hang: true }])))
      yield* core.toRuntime(promptFrame("run-3", script([{ delta: "second" }])))
      assert.isTrue(yield* silent(core))
      const board = yield* StatusBoard
      assert.strictEqual((yield* board.snapshot).active_runs, 1)
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["message_items"] } }))))

  it.effect("a prompt_request image outside the public inline profile gets error then done, before any native call", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", [{ content: [{ type: "input_image", image_url: notAPng }] }]))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "invalid input (image_format_mismatch)" } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors, [])
      yield* core.toRuntime(promptFrame("run-2", [{ content: [{ type: "input_image", image_url: validJpeg }] }]))
      same((yield* until(core, "done")).map((f) => f.type === "delta" ? f.payload.delta : f.type), ["[image]", "done"])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a full Runtime refuses a direct Run with error then done", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(promptFrame("run-1", script([])))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "runtime at capacity" } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
      // The refused Run is gone: it is not counted, and the Run id can be used again.
      yield* adjust(0)
      const board = yield* StatusBoard
      same((yield* board.snapshot).runs, [])
      same((yield* board.snapshot).active_runs, 0)
      yield* core.toRuntime(promptFrame("run-1", script([])))
      same((yield* until(core, "done")).map((f) => f.type), ["error", "done"])
    }).pipe(Effect.provide(processLayer({ maxActive: 1 }))))
})

describe("Cancellation", () => {
  it.effect("answers after native settlement: done closes the stream, the receipt carries the snapshot", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", script([
        { delta: "partial" },
        { usage: { input_tokens: 3 } },
        { cancel_settles_on: "settle" },
        { hang: true }
      ])))
      yield* until(core, "usage")
      yield* core.toRuntime(cancelFrame("run-1", "cancel-1"))
      // Nothing until native settlement.
      yield* adjust("9 seconds")
      const frames = (yield* core.sent).filter((f) => f.type === "done" || f.type === "interaction_decision_ack")
      same(frames, [])
      const signals = yield* ScriptedSignals
      yield* signals.fire("settle")
      same(yield* next(core, "done"), { type: "done", id: "run-1", payload: { content: "" } })
      same(yield* next(core, "interaction_decision_ack"), {
        type: "interaction_decision_ack",
        id: "run-1",
        payload: {
          delivery_id: "cancel-1",
          applied: true,
          outcome: { content: "partial", usage: { input_tokens: 3 }, metadata: metadata("executor-1") }
        }
      })
      // A settled, reusable Executor goes back to the Session's idle pool.
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors.map((e) => e.state), ["idle"])
      yield* core.toRuntime(cancelFrame("run-1", "cancel-2"))
      same((yield* next(core, "interaction_decision_ack")).payload, {
        delivery_id: "cancel-2", applied: false, error_code: "run_inactive"
      })
    }).pipe(Effect.provide(processLayer())))

  it.effect("without a delivery id there is no receipt and done carries the continuity snapshot", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ delta: "partial" }, { hang: true }])))
      yield* next(core, "delta")
      yield* core.toRuntime(cancelFrame("run-1"))
      same(yield* next(core, "done"), {
        type: "done", id: "run-1", payload: { content: "partial", metadata: metadata("executor-1") }
      })
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("cancel_ignored: cancel_timeout after 10 s, no done, and the Run and its Executor stay owned", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      const core = c.core
      yield* core.toRuntime(promptFrame("run-1", script([{ cancel_ignored: true }, { delta: "x" }, { hang: true }])))
      yield* next(core, "delta")
      yield* core.toRuntime(cancelFrame("run-1", "cancel-1"))
      yield* adjust(9_999)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      same(yield* next(core, "interaction_decision_ack"), {
        type: "interaction_decision_ack", id: "run-1", payload: { delivery_id: "cancel-1", applied: false, error_code: "cancel_timeout" }
      })
      yield* adjust("1 minute")
      assert.isTrue(yield* silent(core))
      const board = yield* StatusBoard
      const snapshot = yield* board.snapshot
      same(snapshot.runs, [{ run_id: "run-1", kind: "scripted", executor_id: "executor-1", state: "cancelling" }])
      same(snapshot.executors.map((e) => e.state), ["busy"])
      // On disconnection the unsettled Turn gets 10 s, then its Executor is closed; run returns after that.
      yield* c.core.close(1006)
      yield* adjust(9_999)
      assert.isUndefined(c.fiber.pollUnsafe())
      yield* adjust(1)
      assert.strictEqual((yield* Fiber.join(c.fiber))._tag, "TransportEnded")
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a cancellation that settles after cancel_timeout still closes the stream with the snapshot", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ cancel_settles_on: "late" }, { delta: "x" }, { hang: true }])))
      yield* next(core, "delta")
      yield* core.toRuntime(cancelFrame("run-1", "cancel-1"))
      yield* adjust("10 seconds")
      assert.strictEqual((yield* next(core, "interaction_decision_ack")).payload.error_code, "cancel_timeout")
      const signals = yield* ScriptedSignals
      yield* signals.fire("late")
      same(yield* next(core, "done"), { type: "done", id: "run-1", payload: { content: "x", metadata: metadata("executor-1") } })
    }).pipe(Effect.provide(processLayer())))

  it.effect("a native cancel failure is cancel_failed; a Run that completed first is run_inactive", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ cancel_fails: true }, { delta: "x" }, { wait: "finish" }])))
      yield* next(core, "delta")
      yield* core.toRuntime(cancelFrame("run-1", "cancel-1"))
      same((yield* next(core, "interaction_decision_ack")).payload, {
        delivery_id: "cancel-1", applied: false, error_code: "cancel_failed"
      })
      const signals = yield* ScriptedSignals
      yield* signals.fire("finish")
      assert.strictEqual((yield* next(core, "done")).payload.content, "x")
      yield* core.toRuntime(cancelFrame("run-1", "cancel-2"))
      assert.strictEqual((yield* next(core, "interaction_decision_ack")).payload.error_code, "run_inactive")
      yield* core.toRuntime(cancelFrame("run-unknown", "cancel-3"))
      same(yield* next(core, "interaction_decision_ack"), {
        type: "interaction_decision_ack", id: "run-unknown", payload: { delivery_id: "cancel-3", applied: false, error_code: "run_inactive" }
      })
    }).pipe(Effect.provide(processLayer())))
})

describe("Cancellation receipts", () => {
  it.effect("every receipt waiting at settlement is applied with the snapshot; done closes the stream once", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ cancel_settles_on: "s" }, { delta: "p" }, { hang: true }])))
      yield* next(core, "delta")
      yield* core.toRuntime(cancelFrame("run-1", "c-1"))
      yield* core.toRuntime(cancelFrame("run-1", "c-2"))
      const signals = yield* ScriptedSignals
      yield* signals.fire("s")
      const frames = yield* until(core, "done")
      same(frames, [{ type: "done", id: "run-1", payload: { content: "" } }])
      const acks = [yield* next(core, "interaction_decision_ack"), yield* next(core, "interaction_decision_ack")]
      same(acks.map((a) => a.payload).sort((a, b) => a.delivery_id.localeCompare(b.delivery_id)), [
        { delivery_id: "c-1", applied: true, outcome: { content: "p", metadata: metadata("executor-1") } },
        { delivery_id: "c-2", applied: true, outcome: { content: "p", metadata: metadata("executor-1") } }
      ])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a Turn that settles as not reusable has its Executor closed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", script([{ reusable: false }, { delta: "x" }])))
      yield* until(core, "done")
      yield* adjust(0)
      const board = yield* StatusBoard
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))
})

describe("Cleanup", () => {
  it.effect("keeps a failing close owned and retried; run returns only after the close is confirmed", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* prepareReady(c.core, "prep-1", { agent_options: { scripted: { close_fails: 3 } } })
      yield* c.core.close(1006)
      yield* adjust(0)
      const board = yield* StatusBoard
      assert.isUndefined(c.fiber.pollUnsafe())
      same((yield* board.snapshot).unconfirmed.map((u) => [u.resource, u.attempts]), [["executor-1", 1]])
      yield* adjust(500)
      yield* adjust(750)
      same((yield* board.snapshot).unconfirmed.map((u) => [u.resource, u.attempts]), [["executor-1", 3]])
      assert.isUndefined(c.fiber.pollUnsafe())
      yield* adjust(1_124)
      assert.isUndefined(c.fiber.pollUnsafe())
      yield* adjust(1)
      const end = yield* Fiber.join(c.fiber)
      assert.strictEqual(end._tag, "TransportEnded")
      same((yield* board.snapshot).unconfirmed, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a close attempt that hangs counts as a failure at its timeout", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* prepareReady(c.core, "prep-1", { agent_options: { scripted: { close_hangs: 1 } } })
      yield* c.core.close(1006)
      yield* adjust(9_999)
      const board = yield* StatusBoard
      same((yield* board.snapshot).unconfirmed, [])
      same((yield* board.snapshot).executors.map((e) => e.state), ["closing"])
      yield* adjust(1)
      same((yield* board.snapshot).unconfirmed, [
        { resource: "executor-1", kind: "executor", attempts: 1, last_error: "close attempt timed out" }
      ])
      yield* adjust(500)
      assert.strictEqual((yield* Fiber.join(c.fiber))._tag, "TransportEnded")
    }).pipe(Effect.provide(processLayer())))

  it.effect("device_shutdown stops Runs, closes idle Executors and returns only after confirmed cleanup", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* prepareReady(c.core, "prep-1", { agent_options: { scripted: { close_fails: 1 } } })
      yield* c.core.toRuntime({ type: "prompt_request", id: "run-2" as never, payload: {
        agent_kind: "scripted", conversation_id: "", run_id: "run-2",
        input: script([{ delta: "x" }, { hang: true }]), disable_execution_environment: true
      } })
      yield* next(c.core, "delta")
      yield* c.core.toRuntime({ type: "device_shutdown", payload: { reason: "drain" } })
      // The ready admission is dropped (connection_closed); no done or receipt for the stopped Run.
      const failed = yield* next(c.core, "preparation_status")
      same(failed.payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "failed", expires_at: 300_000, error_code: "connection_closed"
      })
      yield* adjust(0)
      assert.isUndefined(c.fiber.pollUnsafe())
      const board = yield* StatusBoard
      same((yield* board.snapshot).unconfirmed.map((u) => u.resource), ["executor-1"])
      yield* adjust(500)
      same(yield* Fiber.join(c.fiber), { _tag: "ShutdownRequested" })
      assert.isFalse((yield* c.core.sent).some((f) => f.type === "done" || f.type === "interaction_decision_ack"))
      same((yield* board.snapshot).executors, [])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a disconnection stops the Run without inventing error or done and replays nothing on reconnection", () =>
    Effect.gen(function* () {
      const first = yield* connect()
      yield* first.core.toRuntime(promptFrame("run-1", script([{ delta: "x" }, { hang: true }])))
      yield* next(first.core, "delta")
      yield* first.core.close(1006)
      assert.strictEqual((yield* Fiber.join(first.fiber))._tag, "TransportEnded")
      same((yield* first.core.sent).map((f) => f.type), ["heartbeat", "delta"])
      const second = yield* connect({ connectionNumber: 2 })
      assert.strictEqual(second.heartbeat.type, "heartbeat")
      assert.isTrue(yield* silent(second.core))
      const board = yield* StatusBoard
      same((yield* board.snapshot).runs, [])
    }).pipe(Effect.provide(processLayer())))
})

describe("Run output", () => {
  // A wire-invalid value an adapter might still produce (the codec's schema is the judge).
  const unchecked = <A>(value: unknown): A => value as A
  const faulty = (events: ReadonlyArray<TurnEvent>, done: { readonly [k: string]: unknown }) =>
    processLayer({ harnesses: [eventHarness("faulty", events, unchecked(done))] })

  it.effect("a mis-classified adapter error loses its classification, never the frame", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([]), { agent_kind: "faulty" }))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "bad gateway", code: "server_error" } },
        { type: "error", id: "run-1", payload: { error: "odd" } },
        { type: "error", id: "run-1", payload: { error: "reset", code: "connection_failed", http_status: 502 } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
    }).pipe(Effect.provide(faulty([
      // http_status without connection_failed: the encoder would refuse the frame (E9).
      { type: "error", payload: unchecked({ error: "bad gateway", code: "server_error", http_status: 502 }) },
      // a code outside the finite set
      { type: "error", payload: unchecked({ error: "odd", code: "teapot", http_status: 418 }) },
      { type: "error", payload: { error: "reset", code: "connection_failed", http_status: 502 } }
    ], { content: "" }))))

  it.effect("an event the codec refuses becomes a contract violation on the Run; later frames and done still go out", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([]), { agent_kind: "faulty" }))
      same(yield* until(core, "done"), [
        { type: "delta", id: "run-1", payload: { delta: "a", sequence: 1 } },
        { type: "error", id: "run-1", payload: { error: RefusedEventText } },
        { type: "delta", id: "run-1", payload: { delta: "b", sequence: 2 } },
        { type: "done", id: "run-1", payload: { content: "ab" } }
      ])
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(faulty([
      { type: "delta", delta: "a" },
      { type: "usage", payload: unchecked({ input_tokens: -1 }) },
      { type: "delta", delta: "b" }
    ], { content: "ab" }))))

  it.effect("a done the codec refuses is replaced by the smallest done that encodes, so Core's stream closes", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([]), { agent_kind: "faulty" }))
      same(yield* until(core, "done"), [
        { type: "delta", id: "run-1", payload: { delta: "a", sequence: 1 } },
        { type: "error", id: "run-1", payload: { error: RefusedEventText } },
        { type: "done", id: "run-1", payload: { content: "", metadata: { agent_session_id: "native-1" } } }
      ])
      assert.isTrue(yield* silent(core))
      const board = yield* StatusBoard
      same((yield* board.snapshot).runs, [])
    }).pipe(Effect.provide(faulty(
      [{ type: "delta", delta: "a" }],
      { content: "a", usage: { input_tokens: -5 }, metadata: { agent_session_id: "native-1" } }
    ))))

  it.effect("frames queued while a write is pending leave as one batch, in order, done last", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.holdWrites
      const rest = Array.from({ length: 9 }, (_, i) => ({ delta: `d${i + 2}` }))
      yield* core.toRuntime(promptFrame("run-1", script([{ delta: "d1" }, { wait: "go" }, ...rest])))
      yield* settle
      // The first delta's write is pending; the other nine and done queue behind it.
      yield* (yield* ScriptedSignals).fire("go")
      yield* settle
      assert.strictEqual(yield* core.pending, 0)
      yield* core.releaseWrites
      const frames = yield* until(core, "done")
      same(frames.map((f) => (f.type === "delta" ? f.payload.sequence : f.type)), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "done"])
      same(yield* core.batches, [1, 10])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a script longer than the Run's buffer waits for room: every delta leaves once, in order, done last", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.holdWrites
      // 200 deltas against a 64-frame buffer: the scripted Turn queues deltas without an Effect while there is room
      // and waits when the buffer is full (issue 18), several times over while the writes are held.
      const texts = Array.from({ length: 200 }, (_, i) => `d${i + 1};`)
      yield* core.toRuntime(promptFrame("run-1", script(texts.map((delta) => ({ delta })))))
      yield* settle
      yield* core.releaseWrites
      const frames = yield* until(core, "done")
      const deltas = frames.flatMap((f) => (f.type === "delta" ? [f.payload] : []))
      same(deltas.map((d) => d.sequence), texts.map((_, i) => i + 1))
      same(deltas.map((d) => d.delta), texts)
      const done = frames[frames.length - 1]!
      assert.strictEqual(done.type === "done" ? done.payload.content : undefined, texts.join(""))
      const batches = yield* core.batches
      assert.isTrue(batches.every((n) => n <= 64))
      assert.strictEqual(batches.reduce((a, b) => a + b, 0), 201)
    }).pipe(Effect.provide(processLayer())))

  it.effect("Run frames carry the starting request's valid traceparent; a malformed one is never echoed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
      yield* core.toRuntime({ ...promptFrame("run-1", script([{ delta: "a" }])), trace: traceparent })
      same((yield* until(core, "done")).map((f) => f.trace), [traceparent, traceparent])
      yield* core.toRuntime({ ...promptFrame("run-2", script([{ delta: "a" }])), trace: "not-a-traceparent" })
      same((yield* until(core, "done")).map((f) => "trace" in f), [false, false])
    }).pipe(Effect.provide(processLayer())))
})
