import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type { Messages } from "../../src/proto/index.js"
import { HarnessRegistry } from "../../src/runtime/harness/HarnessRegistry.js"
import { makeScriptedHarness } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { notAPng, validJpeg } from "../support/runtimeImages.js"
import type { MemoryTransport } from "../support/runtimeMemoryTransport.js"
import {
  adjust,
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
  steerFrame,
  take,
  text,
  until
} from "../support/runtimeTestWire.js"

const ack = (core: MemoryTransport) => Effect.map(next(core, "prompt_steer_ack"), (f) => f.payload)
const written = (input_id: string) => ({ input_id, accepted: false, written: true })
const accepted = (input_id: string) => ({ input_id, accepted: true })
const failed = (input_id: string, error_code: string) => ({ input_id, accepted: false, error_code })

/** A prepared Run (durable receipts need a settlement contract) with the given script. */
const preparedRun = (core: MemoryTransport, steps: ReadonlyArray<unknown>, runId = "run-1") =>
  Effect.gen(function* () {
    yield* prepareReady(core, "prep-1")
    yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", runId, script(steps)))
    yield* next(core, "preparation_status") // starting
    yield* next(core, "preparation_status") // started
  })

const acks = (frames: ReadonlyArray<Messages.RuntimeToCore>) =>
  frames.flatMap((f) => (f.type === "prompt_steer_ack" ? [f.payload] : []))

describe("Steering", () => {
  it.effect("writes, then accepts and echoes an active input; a duplicate gets the stored final receipt", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1 }, { delta: " done" }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("also this")))
      const frames = yield* until(core, "done")
      same(acks(frames), [written("1"), accepted("1")])
      const done = frames.find((f) => f.type === "done")
      assert.strictEqual(done?.type === "done" ? done.payload.content : "", "also this done")
      // After done: the repeat is answered from the ended Run's receipts (issue #17), a new id is run_inactive.
      yield* core.toRuntime(steerFrame("run-1", "1", text("also this")))
      same(yield* ack(core), accepted("1"))
      yield* core.toRuntime(steerFrame("run-1", "2", text("also this")))
      same(yield* ack(core), failed("2", "run_inactive"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("keeps an ended Run's receipts for 5 minutes after done: answered at 4:59.999, run_inactive at 5:00", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1, accept: "reject" }, { await_steer: 1 }, { delta: " done" }])
      yield* core.toRuntime(steerFrame("run-1", "a", text("first")))
      same(yield* ack(core), written("a"))
      same(yield* ack(core), failed("a", "rejected"))
      yield* core.toRuntime(steerFrame("run-1", "b", text("second")))
      same(acks(yield* until(core, "done")), [written("b"), accepted("b")])
      // Each kept receipt answers its own id; other content under a kept id is a conflict, never a new input.
      yield* core.toRuntime(steerFrame("run-1", "a", text("first")))
      same(yield* ack(core), failed("a", "rejected"))
      yield* core.toRuntime(steerFrame("run-1", "b", text("changed")))
      same(yield* ack(core), failed("b", "input_conflict"))
      yield* core.toRuntime(steerFrame("run-1", "b", text("second"), false))
      same(yield* ack(core), failed("b", "input_conflict"))
      yield* adjust("299999 millis")
      yield* core.toRuntime(steerFrame("run-1", "b", text("second")))
      same(yield* ack(core), accepted("b"))
      yield* adjust("1 millis")
      yield* core.toRuntime(steerFrame("run-1", "b", text("second")))
      same(yield* ack(core), failed("b", "run_inactive"))
      yield* core.toRuntime(steerFrame("run-1", "a", text("first")))
      same(yield* ack(core), failed("a", "run_inactive"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("keeps the receipts of at most 64 ended Runs per connection, dropping the longest-ended first", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      for (let i = 0; i <= 64; i++) {
        yield* core.toRuntime(promptFrame(`run-${i}`, script([{ await_steer: 1 }]), { release_on_completion: true }))
        yield* settle
        yield* core.toRuntime(steerFrame(`run-${i}`, "x", text("in")))
        same(acks(yield* until(core, "done")), [written("x"), accepted("x")])
      }
      yield* core.toRuntime(steerFrame("run-64", "x", text("in")))
      same(yield* ack(core), accepted("x"))
      yield* core.toRuntime(steerFrame("run-1", "x", text("in")))
      same(yield* ack(core), accepted("x"))
      yield* core.toRuntime(steerFrame("run-0", "x", text("in")))
      same(yield* ack(core), failed("x", "run_inactive"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("a steer image outside the public inline profile is invalid_input before any native write", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1 }, { delta: " done" }])
      yield* core.toRuntime(steerFrame("run-1", "1", [{ content: [{ type: "input_image", image_url: notAPng }] }]))
      same(yield* ack(core), failed("1", "invalid_input"))
      // Nothing was written or recorded: the same id with a valid image is written and accepted.
      yield* core.toRuntime(steerFrame("run-1", "1", [{ content: [{ type: "input_image", image_url: validJpeg }] }]))
      const frames = yield* until(core, "done")
      same(acks(frames), [written("1"), accepted("1")])
      const done = frames.find((f) => f.type === "done")
      assert.strictEqual(done?.type === "done" ? done.payload.content : "", "[image] done")
    }).pipe(Effect.provide(processLayer())))

  it.effect("replies in_flight, then written, then the final receipt to duplicates; conflicts and busy are refused", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1, write: "hang" }, { await_steer: 2, accept: "never" }, { hang: true }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), failed("1", "in_flight"))
      yield* core.toRuntime(steerFrame("run-1", "1", text("b")))
      same(yield* ack(core), failed("1", "input_conflict"))
      yield* core.toRuntime(steerFrame("run-1", "1", text("a"), false))
      same(yield* ack(core), failed("1", "input_conflict"))
      yield* core.toRuntime(steerFrame("run-1", "2", text("c")))
      same(yield* ack(core), failed("2", "busy"))
      // The write of "1" never completes: unknown at 10 s, never redelivered.
      yield* adjust("10 seconds")
      same(yield* ack(core), failed("1", "outcome_unknown"))
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), failed("1", "outcome_unknown"))
      // A stored busy lets the retry proceed, but the hung write still owns the slot: busy again.
      yield* core.toRuntime(steerFrame("run-1", "2", text("c")))
      same(yield* ack(core), failed("2", "busy"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("bounds the native write at 10 s: pending at 9.999 s, outcome_unknown at 10 s", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1, write: "hang" }, { hang: true }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      yield* adjust(9_999)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      same(yield* ack(core), failed("1", "outcome_unknown"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("a steer whose native write timed out keeps the slot (busy) until the native call returns", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [
        { await_steer: 1, write: "hang", write_returns_on: "write-returns" },
        { await_steer: 1 },
        { hang: true }
      ])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      yield* adjust("10 seconds")
      same(yield* ack(core), failed("1", "outcome_unknown"))
      // The hung write is still running: a new write never runs beside it.
      yield* core.toRuntime(steerFrame("run-1", "2", text("b")))
      same(yield* ack(core), failed("2", "busy"))
      yield* adjust("1 minute")
      yield* core.toRuntime(steerFrame("run-1", "2", text("b")))
      same(yield* ack(core), failed("2", "busy"))
      // The native call returns (its outcome stays unknown: the final receipt is not replaced): the slot is free.
      yield* (yield* ScriptedSignals).fire("write-returns")
      yield* adjust(0)
      assert.isTrue(yield* silent(core))
      yield* core.toRuntime(steerFrame("run-1", "2", text("b")))
      same((yield* take(core, "prompt_steer_ack")).payload, written("2"))
      same((yield* take(core, "prompt_steer_ack")).payload, accepted("2"))
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same((yield* take(core, "prompt_steer_ack")).payload, failed("1", "outcome_unknown"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("the write timer stops once the write completed: acceptance may take longer than 10 s", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ wait: "go" }, { await_steer: 1 }, { hang: true }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), written("1"))
      yield* adjust("1 minute")
      assert.isTrue(yield* silent(core))
      const signals = yield* ScriptedSignals
      yield* signals.fire("go")
      const frames = yield* until(core, "prompt_steer_ack")
      same(acks(frames), [accepted("1")])
    }).pipe(Effect.provide(processLayer())))

  it.effect("each receipt send has its own 5 s budget: a stuck write is abandoned at 5 s, never replayed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1 }, { hang: true }])
      yield* core.holdWrites
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      yield* adjust(5_000)
      yield* core.releaseWrites
      yield* adjust(0)
      // The `written` send ran out of budget; `accepted` (its own budget) went out once writes resumed.
      same(acks(yield* core.sent), [accepted("1")])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a receipt send that completes within its 5 s budget is written in order", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1 }, { hang: true }])
      yield* core.holdWrites
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      yield* adjust(4_999)
      yield* core.releaseWrites
      yield* adjust(0)
      same(acks(yield* core.sent), [written("1"), accepted("1")])
    }).pipe(Effect.provide(processLayer())))

  it.effect("waits at most 15 s before done for an in-flight input, then reports it unknown", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1, accept: "never" }, { delta: "end" }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), written("1"))
      yield* next(core, "delta")
      yield* adjust(14_999)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      same(yield* ack(core), failed("1", "outcome_unknown"))
      assert.strictEqual((yield* next(core, "done")).payload.content, "end")
    }).pipe(Effect.provide(processLayer())))

  it.effect("not_ready before the Turn exists lets the identical retry proceed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ await_steer: 1 }]), {
        agent_options: { scripted: { prepare_wait: "prepared" } }
      }))
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), failed("1", "not_ready"))
      const signals = yield* ScriptedSignals
      yield* signals.fire("prepared")
      yield* adjust(0)
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      const frames = yield* until(core, "done")
      same(acks(frames), [written("1"), accepted("1")])
    }).pipe(Effect.provide(processLayer())))

  it.effect("refuses the 257th distinct input id of a Run with input_limit", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 256 }, { hang: true }])
      for (let i = 1; i <= 256; i++) {
        yield* core.toRuntime(steerFrame("run-1", `${i}`, text("x")))
        while (true) {
          const frame = yield* core.fromRuntime
          if (frame.type === "prompt_steer_ack" && frame.payload.accepted) break
        }
      }
      yield* core.toRuntime(steerFrame("run-1", "257", text("x")))
      const limit = yield* until(core, "prompt_steer_ack")
      same(acks(limit), [failed("257", "input_limit")])
      // Known ids still get their stored receipt.
      yield* core.toRuntime(steerFrame("run-1", "7", text("x")))
      same(yield* ack(core), accepted("7"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("reports rejected, run_inactive and invalid_input definitively", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ await_steer: 1, write: "reject" }, { await_steer: 1, accept: "reject" }, { hang: true }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), failed("1", "rejected"))
      yield* core.toRuntime(steerFrame("run-1", "2", text("b")))
      same(yield* ack(core), written("2"))
      same(yield* ack(core), failed("2", "rejected"))
      yield* core.toRuntime(steerFrame("run-9", "1", text("a")))
      same(yield* ack(core), failed("1", "run_inactive"))
      yield* core.toRuntime(steerFrame("run-1", "3", [{ content: [] }]))
      same(yield* ack(core), failed("3", "invalid_input"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("checks the admitted snapshot: unsupported input modes and contract violations", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* preparedRun(core, [{ hang: true }])
      yield* core.toRuntime(steerFrame("run-1", "1", text("a"), false))
      same(yield* ack(core), failed("1", "unsupported"))
      yield* core.toRuntime(steerFrame("run-1", "1", text("a"), false))
      same(yield* ack(core), failed("1", "unsupported"))
      yield* core.toRuntime(steerFrame("run-1", "2", text("a")))
      same(yield* ack(core), failed("2", "contract_violation"))
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["steering"], contractViolations: ["steer"] } }))))

  it.effect("durable receipts need a settlement contract on a direct Run", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const frame = promptFrame("run-1", script([{ hang: true }]))
      if (frame.type !== "prompt_request") return
      const { release_on_completion: _omitted, ...payload } = frame.payload
      yield* core.toRuntime({ ...frame, payload })
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      same(yield* ack(core), failed("1", "unsupported"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("connection loss mid-receipt keeps the Run's cleanup owned and replays nothing", () =>
    Effect.gen(function* () {
      const first = yield* connect()
      yield* prepareReady(first.core, "prep-1", { agent_options: { scripted: { close_fails: 1 } } })
      yield* first.core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", script([
        { cancel_ignored: true },
        { await_steer: 1, write: "hang" },
        { hang: true }
      ])))
      yield* until(first.core, "preparation_status")
      yield* core_steer(first.core)
      yield* first.core.close(1006)
      // The unsettled Turn gets 10 s; then its Executor is closed until confirmed (the first attempt fails).
      yield* adjust("10 seconds")
      const board = yield* StatusBoard
      assert.isUndefined(first.fiber.pollUnsafe())
      same((yield* board.snapshot).unconfirmed.map((u) => u.resource), ["executor-1"])
      yield* adjust(500)
      assert.strictEqual((yield* Fiber.join(first.fiber))._tag, "TransportEnded")
      // No steer receipt was ever sent for the lost input, and nothing is replayed on the next connection.
      same(acks(yield* first.core.sent), [])
      const second = yield* connect({ connectionNumber: 2 })
      yield* adjust("1 minute")
      assert.isTrue(yield* silent(second.core))
    }).pipe(Effect.provide(processLayer())))
})

const core_steer = (core: MemoryTransport) =>
  Effect.gen(function* () {
    yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
    yield* adjust(0)
  })

describe("Declaration snapshots", () => {
  it.effect("an admitted Executor and its Turn keep the declaration they were admitted with", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* prepareReady(core, "prep-1")
      // A later registration narrows the kind; the existing owner's snapshot is unchanged.
      const registry = yield* HarnessRegistry
      yield* registry.register(yield* makeScriptedHarness({ disabledCapabilities: ["steering", "durable_input_receipts"] }))
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", script([{ await_steer: 1 }])))
      yield* next(core, "preparation_status")
      yield* next(core, "preparation_status")
      yield* core.toRuntime(steerFrame("run-1", "1", text("a")))
      const frames = yield* until(core, "done")
      same(acks(frames), [written("1"), accepted("1")])
      // A new direct Run takes the new declaration.
      yield* core.toRuntime(promptFrame("run-2", script([{ hang: true }])))
      yield* core.toRuntime(steerFrame("run-2", "1", text("a")))
      same(yield* ack(core), failed("1", "unsupported"))
    }).pipe(Effect.provide(processLayer())))
})
