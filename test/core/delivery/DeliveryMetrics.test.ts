/**
 * Issue #22: the metrics a Turn's delivery records in Core (CoreMetrics), against a fake session on TestClock:
 * admissions by outcome and code and unconfirmed cleanups, Runs started / active / finished by status, input
 * receipts by phase and outcome (written / applied × accepted / unknown, each budget at its boundary), and
 * cancel outcomes. A fresh metric registry per test; values read back through the Prometheus text format.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import * as Delivery from "../../../src/core/Delivery.js"
import { Ids, MessageInput, type Messages } from "../../../src/proto/index.js"
import { allSupported, descriptor } from "../../support/capabilities.js"
import { type CoreHarness, makeFake } from "../../support/coreFakeSession.js"
import { parsePrometheusText, sumOf, valueOf } from "../../support/prometheusText.js"
import { KIND, spec } from "../policy/fixtures.js"

const REQ = Ids.unsafeMake.preparationRequestId("prep-1")
const RUN = Ids.unsafeMake.runId("run-1")
const HANDLE = Ids.unsafeMake.admissionHandle("handle-1")
const EXECUTOR = Ids.unsafeMake.executorId("executor-1")
const plan: Delivery.PreparedPlan = { request_id: REQ, run_id: RUN, spec: spec(), input: MessageInput.text("hello") }

type Msg<T extends Messages.RuntimeToCoreType> = Messages.MessageOfType<T>
const status = (payload: Msg<"preparation_status">["payload"]): Msg<"preparation_status"> => ({ type: "preparation_status", id: REQ, payload })
const preparing = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 1, state: "preparing" })
const ready = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 2, state: "ready", expires_at: 1_760_000_300_000 })
const done: Msg<"done"> = { type: "done", id: RUN, payload: { content: "" } }
const steerAck = (payload: Partial<Msg<"prompt_steer_ack">["payload"]>): Msg<"prompt_steer_ack"> => ({
  type: "prompt_steer_ack",
  id: RUN,
  payload: { input_id: "1", accepted: false, ...payload }
})

const scrape = Effect.map(PrometheusMetrics.format(), parsePrometheusText)
const count = (name: string, labels: Record<string, string> = {}) => Effect.map(scrape, (e) => sumOf(e, name, labels))
/** Runs a test in its own, empty metric registry. */
const fresh = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => Effect.provideService(self, Metric.MetricRegistry, new Map()))

const startedTurn = (h: CoreHarness) =>
  Effect.gen(function*() {
    const turn = yield* Delivery.deliverPrepared(h.session, plan)
    assert.strictEqual((yield* h.receive).type, "execution_prepare")
    yield* h.emit(preparing)
    yield* h.emit(ready)
    assert.strictEqual((yield* h.receive).type, "execution_start")
    yield* h.flush
    return turn
  })

const fake = Effect.tap(makeFake(), (f) => f.heartbeat([descriptor(KIND, allSupported())]))

describe("Core delivery metrics", () => {
  it.effect("a completed Run with a steer: admission ready, Run started / active / finished, written then applied receipts", () =>
    Effect.gen(function*() {
      const h = yield* fake
      const turn = yield* startedTurn(h)
      assert.strictEqual(yield* count("agentwire_core_admissions_total", { outcome: "ready", code: "none" }), 1)
      assert.strictEqual(yield* count("agentwire_core_runs_started_total"), 1)
      assert.strictEqual(valueOf(yield* scrape, "agentwire_core_runs_active"), 1)
      const steer = yield* Effect.forkChild(turn.steer(Ids.unsafeMake.inputId("1"), MessageInput.text("more")))
      yield* h.receive
      yield* h.emit(steerAck({ written: true }))
      yield* h.flush
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total", { phase: "written", outcome: "accepted" }), 1)
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total", { phase: "applied" }), 0)
      yield* h.emit(steerAck({ accepted: true }))
      yield* Fiber.join(steer)
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total", { phase: "applied", outcome: "accepted" }), 1)
      yield* h.emit(done)
      assert.strictEqual((yield* turn.result).status, "completed")
      yield* h.flush
      assert.strictEqual(yield* count("agentwire_core_runs_finished_total", { status: "completed" }), 1)
      assert.strictEqual(valueOf(yield* scrape, "agentwire_core_runs_active"), 0)
    }).pipe(fresh))

  it.effect("a steer without written receipt is written/unknown at 30 s (not 1 ms before)", () =>
    Effect.gen(function*() {
      const h = yield* fake
      const turn = yield* startedTurn(h)
      const first = yield* Effect.forkChild(turn.steer(Ids.unsafeMake.inputId("1"), MessageInput.text("more")))
      yield* h.receive
      yield* TestClock.adjust("29999 millis")
      yield* h.flush
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total"), 0)
      yield* TestClock.adjust("1 millis")
      yield* Effect.flip(Fiber.join(first))
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total", { phase: "written", outcome: "unknown" }), 1)
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total"), 1)
    }).pipe(fresh))

  it.effect("a written steer whose Turn ends first is applied/unknown", () =>
    Effect.gen(function*() {
      const h = yield* fake
      const turn = yield* startedTurn(h)
      const steer = yield* Effect.forkChild(turn.steer(Ids.unsafeMake.inputId("1"), MessageInput.text("more")))
      yield* h.receive
      yield* h.emit(steerAck({ written: true }))
      yield* h.emit(done)
      yield* TestClock.adjust("1 second")
      yield* Effect.flip(Fiber.join(steer))
      assert.strictEqual(yield* count("agentwire_core_input_receipts_total", { phase: "applied", outcome: "unknown" }), 1)
      yield* Effect.flip(turn.result)
      yield* h.flush
      assert.strictEqual(yield* count("agentwire_core_runs_finished_total", { status: "failed" }), 1)
    }).pipe(fresh))

  it.effect("a cancel without receipt is counted unconfirmed at 15 s", () =>
    Effect.gen(function*() {
      const h = yield* fake
      const turn = yield* startedTurn(h)
      const cancel = yield* Effect.forkChild(turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")))
      yield* h.receive
      yield* TestClock.adjust("14999 millis")
      yield* h.flush
      assert.strictEqual(yield* count("agentwire_core_cancels_total"), 0)
      yield* TestClock.adjust("1 millis")
      yield* Effect.flip(Fiber.join(cancel))
      assert.strictEqual(yield* count("agentwire_core_cancels_total", { outcome: "unconfirmed" }), 1)
      assert.strictEqual(yield* count("agentwire_core_cancels_total"), 1)
    }).pipe(fresh))

  it.effect("a preparation failed with an unconfirmed cleanup counts as a failed admission with its code and as an unconfirmed cleanup", () =>
    Effect.gen(function*() {
      const h = yield* fake
      yield* Delivery.deliverPrepared(h.session, plan)
      assert.strictEqual((yield* h.receive).type, "execution_prepare")
      yield* h.emit(preparing)
      yield* h.emit(status({ handle: HANDLE, executor_id: EXECUTOR, revision: 2, state: "failed", error_code: "executor_cleanup_unconfirmed" }))
      yield* h.flush
      assert.strictEqual(yield* count("agentwire_core_admissions_total", { outcome: "failed", code: "executor_cleanup_unconfirmed" }), 1)
      assert.strictEqual(yield* count("agentwire_core_cleanups_unconfirmed_total", { code: "executor_cleanup_unconfirmed" }), 1)
      assert.strictEqual(yield* count("agentwire_core_runs_started_total"), 0)
    }).pipe(fresh))
})
