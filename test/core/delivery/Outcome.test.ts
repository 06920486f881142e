import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { RunEvent } from "../../../src/core/DeviceSession.js"
import * as Outcome from "../../../src/core/Outcome.js"
import { Ids, type Preparation, type RunEvents } from "../../../src/proto/index.js"

type Fact = Outcome.TurnFact
const run = Ids.unsafeMake.runId("run-1")
const handle = Ids.unsafeMake.admissionHandle("h-1")

const status = (revision: number, state: Preparation.PreparationState, extra: Partial<Preparation.PreparationStatusPayload> = {}): Fact => ({
  _tag: "PreparationStatus",
  status: { handle, revision, state, ...extra }
})
const rejected = (operation: Preparation.ControlOperation, code: Preparation.PreparationStatusPayload["error_code"]): Fact => ({
  _tag: "PreparationStatus",
  status: { revision: 0, state: "rejected", operation, ...(code === undefined ? {} : { error_code: code }) }
})
const sent = (type: Outcome.DispatchType, extra: { delivery_id?: string; input_id?: string } = {}): Fact => ({
  _tag: "Dispatched",
  type,
  ...extra
})
const ev = (event: RunEvent): Fact => ({ _tag: "RunEvent", event })
const delta = (text: string, sequence: number) => ev({ type: "delta", id: run, payload: { delta: text, sequence } })
const usage = (input_tokens: number) => ev({ type: "usage", id: run, payload: { input_tokens } })
const error = (text: string, code?: RunEvents.ErrorPayload["code"], http_status?: number) =>
  ev({
    type: "error",
    id: run,
    payload: { error: text, ...(code === undefined ? {} : { code }), ...(http_status === undefined ? {} : { http_status }) }
  })
const done = (payload: Partial<RunEvents.DonePayload> = {}) => ev({ type: "done", id: run, payload: { content: "", ...payload } })
const lost = (reason: Outcome.ObservationEnd): Fact => ({ _tag: "RunObservationEnded", reason })
const receipt = (delivery_id: string, applied: boolean, extra: { error_code?: "run_inactive" | "cancel_timeout" | "cancel_failed"; outcome?: RunEvents.DonePayload } = {}): Fact => ({
  _tag: "CancelReceipt",
  delivery_id,
  ack: { delivery_id: Ids.unsafeMake.deliveryId(delivery_id), applied, ...extra }
})

/** A prepared Turn up to `started`. */
const started: ReadonlyArray<Fact> = [
  sent("execution_prepare"),
  status(1, "preparing"),
  status(2, "ready", { executor_id: Ids.unsafeMake.executorId("ex-1"), expires_at: 1_000 }),
  sent("execution_start"),
  status(3, "starting", { run_id: run }),
  status(4, "started", { run_id: run })
]

const settled = (facts: ReadonlyArray<Fact>): Outcome.TurnOutcome => {
  const r = Outcome.project(run, facts)
  if (r._tag !== "Settled") throw new Error(`expected Settled, got ${r._tag}`)
  return r.outcome
}

/** The typed result of a resolved journal. */
const result = (facts: ReadonlyArray<Fact>) => {
  const r = Outcome.project(run, facts)
  if (r._tag === "Pending") throw new Error("expected a resolution, got Pending")
  return Outcome.toResult(r)
}

describe("Outcome.project", () => {
  describe("completed Turns", () => {
    it("completes on done with content, native Session identity and the last usage snapshot", () => {
      assert.deepStrictEqual(
        settled([
          ...started,
          delta("Hel", 1),
          usage(10),
          usage(25),
          done({ content: "Hello", metadata: { agent_session_id: "thread_1", agent_session_type: "codex_thread" } })
        ]),
        {
          status: "completed",
          content: "Hello",
          usage: { input_tokens: 25 },
          native_session_id: "thread_1",
          native_session_type: "codex_thread"
        }
      )
    })

    it("replaces usage with done's snapshot and never adds snapshots; absent usage stays unknown", () => {
      assert.deepStrictEqual(settled([...started, usage(10), done({ usage: { input_tokens: 7 } })]).usage, { input_tokens: 7 })
      assert.isUndefined(settled([...started, done()]).usage)
    })

    it("stays pending while the stream is open", () => {
      assert.deepStrictEqual(Outcome.project(run, [...started, delta("x", 1)]), { _tag: "Pending" })
    })

    it("completes the direct prompt_request path", () => {
      assert.strictEqual(settled([sent("prompt_request"), delta("x", 1), done({ content: "x" })]).status, "completed")
    })
  })

  describe("failure paths", () => {
    it("records delivery_failed when the first request never entered the send queue", () => {
      assert.deepStrictEqual(settled([{ _tag: "NotDispatched", type: "execution_prepare", reason: "queue_full" }]), {
        status: "failed",
        error_code: "delivery_failed",
        detail: "queue_full"
      })
    })

    it("records delivery_unknown when the start was queued and observation ended before any event", () => {
      assert.deepStrictEqual(settled([...started.slice(0, 4), lost("disconnected")]), {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "disconnected"
      })
      assert.deepStrictEqual(settled([sent("prompt_request"), lost("replaced")]), {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "replaced"
      })
    })

    it("records event_stream_incomplete when the subscription ends after events (it replaces the send reason)", () => {
      assert.deepStrictEqual(settled([...started.slice(0, 4), delta("x", 1), lost("disconnected")]), {
        status: "failed",
        error_code: "event_stream_incomplete",
        observation: "disconnected"
      })
      // `starting` alone proves the transfer: the send is no longer the reason.
      assert.strictEqual(settled([...started.slice(0, 5), lost("liveness_timeout")]).error_code, "event_stream_incomplete")
    })

    it("treats a malformed frame naming the Run as proof of delivery, whichever subscription was recorded first", () => {
      const expected: Outcome.TurnOutcome = { status: "failed", error_code: "event_stream_incomplete", observation: "invalid_run_frame" }
      // `started` recorded before the Run observer's failure, and after it (the race between the two streams).
      assert.deepStrictEqual(settled([...started, lost("invalid_run_frame")]), expected)
      assert.deepStrictEqual(settled([...started.slice(0, 4), lost("invalid_run_frame"), ...started.slice(4)]), expected)
      // Without any status after the start: still not delivery_unknown.
      assert.deepStrictEqual(settled([...started.slice(0, 4), lost("invalid_run_frame")]), expected)
      // A connection closed for invalid frames proves nothing about this Run.
      assert.strictEqual(settled([...started.slice(0, 4), lost("invalid_frame")]).error_code, "delivery_unknown")
    })

    it("records event_stream_incomplete with the overflow as the observation reason", () => {
      assert.deepStrictEqual(settled([...started, delta("x", 1), lost("subscriber_overflow")]), {
        status: "failed",
        error_code: "event_stream_incomplete",
        observation: "subscriber_overflow"
      })
    })

    it("keeps native evidence apart from the observation reason, and never invents done", () => {
      const o = settled([...started, usage(3), error("boom", "server_error"), lost("disconnected")])
      assert.deepStrictEqual(o, {
        status: "failed",
        error_code: "event_stream_incomplete",
        observation: "disconnected",
        engine_error_code: "server_error",
        error: "boom",
        usage: { input_tokens: 3 }
      })
    })

    it("records engine_failed for an error followed by done, with the accepted code and status", () => {
      assert.deepStrictEqual(settled([...started, error("reset", "connection_failed", 502), done({ content: "partial" })]), {
        status: "failed",
        error_code: "engine_failed",
        engine_error_code: "connection_failed",
        engine_http_status: 502,
        error: "reset",
        content: "partial"
      })
    })

    it("keeps an unclassified error unclassified (the last error frame decides the classification)", () => {
      const o = settled([...started, error("a", "rate_limit_exceeded"), error("b"), done()])
      assert.strictEqual(o.error_code, "engine_failed")
      assert.isUndefined(o.engine_error_code)
    })

    it("says cleanup is unconfirmed for a failed admission without its confirmed release (a restart too)", () => {
      const failed = status(2, "failed", { error_code: "executor_cleanup_unconfirmed" })
      assert.deepStrictEqual(Outcome.project(run, [sent("execution_prepare"), status(1, "preparing"), failed]), { _tag: "Pending" })
      assert.deepStrictEqual(
        settled([sent("execution_prepare"), status(1, "preparing"), failed, { _tag: "PreparationObservationEnded", reason: "core_restarted" }]),
        { status: "failed", error_code: "cleanup_unconfirmed", preparation_error_code: "executor_cleanup_unconfirmed", observation: "core_restarted" }
      )
      assert.deepStrictEqual(settled([sent("execution_prepare"), status(1, "preparing"), failed, status(3, "expired")]), {
        status: "failed",
        error_code: "preparation_failed",
        preparation_error_code: "executor_cleanup_unconfirmed",
        detail: "cleanup_confirmed"
      })
      // Any other failed status is a plain, definite failure at once.
      assert.strictEqual(settled([sent("execution_prepare"), status(1, "preparing"), status(2, "failed", { error_code: "preparation_failed" })]).error_code, "preparation_failed")
    })

    it("records preparation_interrupted when observation ends after a status and before start", () => {
      assert.deepStrictEqual(
        settled([sent("execution_prepare"), status(1, "preparing"), { _tag: "PreparationObservationEnded", reason: "disconnected" }]),
        { status: "failed", error_code: "preparation_interrupted", observation: "disconnected" }
      )
      assert.strictEqual(
        settled([sent("execution_prepare"), { _tag: "PreparationObservationEnded", reason: "disconnected" }]).error_code,
        "delivery_unknown"
      )
    })

    it("lets the Run subscription decide once the start was sent", () => {
      const facts = [...started.slice(0, 4), { _tag: "PreparationObservationEnded", reason: "subscriber_overflow" } as Fact]
      assert.deepStrictEqual(Outcome.project(run, facts), { _tag: "Pending" })
    })
  })

  describe("preparation", () => {
    it("leaves the Turn unclaimed after a definite preparation_capacity rejection", () => {
      assert.deepStrictEqual(Outcome.project(run, [sent("execution_prepare"), rejected("execution_prepare", "preparation_capacity")]), {
        _tag: "Unclaimed",
        error: new Outcome.PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" }),
        reason: "preparation_capacity"
      })
    })

    it("fails the Turn for every other rejection (no replay)", () => {
      assert.deepStrictEqual(settled([sent("execution_prepare"), rejected("execution_prepare", "configuration_conflict")]), {
        status: "failed",
        error_code: "preparation_rejected",
        preparation_error_code: "configuration_conflict",
        preparation_operation: "execution_prepare"
      })
      assert.deepStrictEqual(settled([...started.slice(0, 4), rejected("execution_start", "executor_unavailable")]), {
        status: "failed",
        error_code: "preparation_rejected",
        preparation_error_code: "executor_unavailable",
        preparation_operation: "execution_start"
      })
    })

    it("fails on failed and expired statuses", () => {
      assert.deepStrictEqual(settled([sent("execution_prepare"), status(1, "preparing"), status(2, "failed", { error_code: "preparation_failed" })]), {
        status: "failed",
        error_code: "preparation_failed",
        preparation_error_code: "preparation_failed"
      })
      assert.strictEqual(settled([sent("execution_prepare"), status(1, "expired")]).error_code, "preparation_expired")
    })

    it("ignores older, repeated and foreign-handle statuses", () => {
      const facts: ReadonlyArray<Fact> = [
        sent("execution_prepare"),
        status(2, "ready", { executor_id: Ids.unsafeMake.executorId("ex-1"), expires_at: 1 }),
        status(1, "failed", { error_code: "preparation_failed" }),
        status(2, "failed", { error_code: "preparation_failed" }),
        { _tag: "PreparationStatus", status: { handle: Ids.unsafeMake.admissionHandle("other"), revision: 9, state: "failed", error_code: "preparation_failed" } }
      ]
      assert.deepStrictEqual(Outcome.project(run, facts), { _tag: "Pending" })
    })

    it("is cancelled when Core abandons before start", () => {
      assert.deepStrictEqual(settled([sent("execution_prepare"), status(1, "preparing"), { _tag: "Abandoned" }, sent("execution_release")]), {
        status: "cancelled"
      })
    })
  })

  describe("cancellation", () => {
    const cancelled = (facts: ReadonlyArray<Fact>) => settled([...started, ...facts])

    it("is cancelled by an applied receipt with its continuity snapshot", () => {
      assert.deepStrictEqual(
        cancelled([
          usage(5),
          sent("prompt_cancel", { delivery_id: "c1" }),
          receipt("c1", true, {
            outcome: { content: "partial", usage: { input_tokens: 9 }, metadata: { agent_session_id: "native" } }
          })
        ]),
        {
          status: "cancelled",
          cancel_delivery_id: "c1",
          content: "partial",
          usage: { input_tokens: 9 },
          native_session_id: "native"
        }
      )
    })

    it("does not settle on done while the receipt is pending; the receipt decides", () => {
      const before = [...started, sent("prompt_cancel", { delivery_id: "c1" }), done({ content: "" })]
      assert.deepStrictEqual(Outcome.project(run, before), { _tag: "Pending" })
      assert.strictEqual(settled([...before, receipt("c1", true)]).status, "cancelled")
    })

    it("records cancel_unconfirmed when no receipt came, even after a done (done implies no success)", () => {
      assert.deepStrictEqual(
        cancelled([sent("prompt_cancel", { delivery_id: "c1" }), done({ content: "x" }), { _tag: "CancelUnconfirmed", delivery_id: "c1", reason: "no_receipt" }]),
        { status: "failed", error_code: "cancel_unconfirmed", cancel_delivery_id: "c1", content: "x" }
      )
    })

    it("records cancel_unconfirmed for a non-applied receipt, keeping its code", () => {
      assert.deepStrictEqual(
        cancelled([sent("prompt_cancel", { delivery_id: "c1" }), receipt("c1", false, { error_code: "cancel_timeout" })]),
        { status: "failed", error_code: "cancel_unconfirmed", cancel_delivery_id: "c1", cancel_error_code: "cancel_timeout" }
      )
    })

    it("lets the done decide when the receipt says the Run was already inactive", () => {
      assert.strictEqual(
        cancelled([sent("prompt_cancel", { delivery_id: "c1" }), done({ content: "all" }), receipt("c1", false, { error_code: "run_inactive" })]).status,
        "completed"
      )
      assert.strictEqual(
        cancelled([sent("prompt_cancel", { delivery_id: "c1" }), receipt("c1", false, { error_code: "run_inactive" })]).error_code,
        "cancel_unconfirmed"
      )
    })

    it("records cancel_unconfirmed when observation ends with the cancellation pending", () => {
      assert.deepStrictEqual(cancelled([sent("prompt_cancel", { delivery_id: "c1" }), lost("disconnected")]), {
        status: "failed",
        error_code: "cancel_unconfirmed",
        observation: "disconnected",
        cancel_delivery_id: "c1"
      })
    })

    it("lets the receipt own the outcome even when an input became unknown first", () => {
      assert.strictEqual(
        cancelled([
          sent("prompt_steer", { input_id: "1" }),
          { _tag: "InputUnknown", input_id: "1", reason: "written_ack_timeout" },
          sent("prompt_cancel", { delivery_id: "c1" }),
          receipt("c1", true)
        ]).status,
        "cancelled"
      )
    })

    it("ignores a best-effort abort without delivery id", () => {
      assert.deepStrictEqual(Outcome.project(run, [...started, sent("prompt_cancel")]), { _tag: "Pending" })
    })
  })

  describe("engine failure classification is subordinate", () => {
    it("never turns a cancelled Turn into a failure", () => {
      const o = settled([
        ...started,
        sent("prompt_cancel", { delivery_id: "c1" }),
        receipt("c1", true),
        error("late", "rate_limit_exceeded"),
        done({ content: "" })
      ])
      assert.strictEqual(o.status, "cancelled")
      assert.isUndefined(o.error_code)
      assert.strictEqual(o.engine_error_code, "rate_limit_exceeded")
    })

    it("never turns a completed Turn into a failure (a drained error after done is evidence only)", () => {
      const o = settled([...started, done({ content: "ok" }), error("late", "authentication_error")])
      assert.strictEqual(o.status, "completed")
      assert.isUndefined(o.error_code)
      assert.strictEqual(o.engine_error_code, "authentication_error")
    })

    it("never hides an incomplete event stream", () => {
      const o = settled([...started, error("x", "server_overloaded"), lost("disconnected")])
      assert.strictEqual(o.error_code, "event_stream_incomplete")
      assert.strictEqual(o.engine_error_code, "server_overloaded")
    })

    it("drops http_status for anything but connection_failed (normalized at decode)", () => {
      const o = settled([...started, error("x", "server_error"), done()])
      assert.isUndefined(o.engine_http_status)
    })
  })

  describe("active input", () => {
    it("waits for an in-flight input at done and completes once it is accepted", () => {
      const facts = [...started, sent("prompt_steer", { input_id: "1" }), { _tag: "InputWritten", input_id: "1" } as Fact, done()]
      assert.deepStrictEqual(Outcome.project(run, facts), { _tag: "Pending" })
      assert.strictEqual(settled([...facts, { _tag: "InputAccepted", input_id: "1" }]).status, "completed")
    })

    it("fails with input_outcome_unknown when an input's outcome stays unknown", () => {
      assert.deepStrictEqual(
        settled([...started, sent("prompt_steer", { input_id: "1" }), done(), { _tag: "InputUnknown", input_id: "1", reason: "turn_ended" }]),
        { status: "failed", error_code: "input_outcome_unknown", unknown_input_id: "1", content: "" }
      )
    })

    it("a definite input rejection does not fail the Turn", () => {
      assert.strictEqual(
        settled([...started, sent("prompt_steer", { input_id: "1" }), { _tag: "InputRejected", input_id: "1", code: "input_conflict" }, done()]).status,
        "completed"
      )
    })
  })

  describe("admission", () => {
    it("leaves the Turn unclaimed while capabilities are unknown or the Harness is unavailable", () => {
      assert.deepStrictEqual(
        Outcome.project(run, [Outcome.admissionFact(new Outcome.CapabilitiesUndeclared({ kind: "codex" }))]),
        { _tag: "Unclaimed", reason: "capabilities_undeclared", error: new Outcome.CapabilitiesUndeclared({ kind: "codex" }) }
      )
      assert.deepStrictEqual(
        Outcome.project(run, [Outcome.admissionFact(new Outcome.HarnessUnavailable({ kind: "codex", reason: "unavailable" }))]),
        { _tag: "Unclaimed", reason: "harness_unavailable", error: new Outcome.HarnessUnavailable({ kind: "codex", reason: "unavailable" }) }
      )
    })

    it("fails the Turn on an unsupported capability or an invalid binding, and maps back to the typed error", () => {
      const unsupported = new Outcome.CapabilityUnsupported({ kind: "codex", capability: "function_tools", source: "engine_profile" })
      const r = Outcome.project(run, [Outcome.admissionFact(unsupported)])
      assert(r._tag !== "Pending")
      assert.deepStrictEqual(Outcome.toResult(r), Result.fail(unsupported))
      const binding = new Outcome.BindingInvalid({ reason: "missing_binding" })
      assert.deepStrictEqual(
        result([Outcome.admissionFact(binding)]),
        Result.fail(binding)
      )
    })
  })

  describe("typed results", () => {
    it("maps each resolution to an error that says what is known", () => {
      assert.deepStrictEqual(result([sent("execution_prepare"), rejected("execution_prepare", "preparation_capacity")]), Result.fail(new Outcome.PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" })))
      assert.deepStrictEqual(result([...started.slice(0, 4), lost("disconnected")]), Result.fail(new Outcome.DeliveryUnknown({ run_id: run, reason: "disconnected" })))
      assert.deepStrictEqual(result([...started, delta("x", 1), lost("subscriber_overflow")]), Result.fail(new Outcome.ExecutionUnknown({ run_id: run, reason: "subscriber_overflow" })))
      assert.deepStrictEqual(result([...started, error("x", "invalid_request"), done()]), Result.fail(new Outcome.ExecutionFailed({ run_id: run, engine_error_code: "invalid_request" })))
      assert.deepStrictEqual(result([...started, done({ content: "ok" })]), Result.succeed({ status: "completed", content: "ok" }))
    })

    it("carries a definite cancel_failed receipt apart from an unconfirmed cancellation", () => {
      const cancelling = [...started, sent("prompt_cancel", { delivery_id: "c1" })]
      assert.deepStrictEqual(
        result([...cancelling, receipt("c1", false, { error_code: "cancel_failed" })]),
        Result.fail(new Outcome.CancelFailed({ run_id: run, delivery_id: "c1", code: "cancel_failed" }))
      )
      assert.deepStrictEqual(
        result([...cancelling, receipt("c1", false, { error_code: "cancel_timeout" })]),
        Result.fail(new Outcome.CancelUnconfirmed({ run_id: run, delivery_id: "c1", reason: "not_applied", code: "cancel_timeout" }))
      )
      assert.deepStrictEqual(
        result([...cancelling, { _tag: "CancelUnconfirmed", delivery_id: "c1", reason: "receipt_overflow" }]),
        Result.fail(new Outcome.CancelUnconfirmed({ run_id: run, delivery_id: "c1", reason: "receipt_overflow" }))
      )
      assert.deepStrictEqual(
        result([...cancelling, lost("disconnected")]),
        Result.fail(new Outcome.CancelUnconfirmed({ run_id: run, delivery_id: "c1", reason: "connection_lost" }))
      )
    })

    it("says which preparation end it saw (failed, expired, released) and keeps the engine classification current", () => {
      const prepared = [sent("execution_prepare"), status(1, "preparing")]
      assert.deepStrictEqual(result([...prepared, status(2, "released")]), Result.fail(new Outcome.PreparationFailed({ state: "released" })))
      assert.deepStrictEqual(result([...prepared, status(2, "expired")]), Result.fail(new Outcome.PreparationFailed({ state: "expired" })))
      // the last error frame after settlement updates the carried error as it updates the outcome
      assert.deepStrictEqual(
        result([...started, error("a", "invalid_request"), done(), error("b", "rate_limit_exceeded", 429)]),
        Result.fail(new Outcome.ExecutionFailed({ run_id: run, engine_error_code: "rate_limit_exceeded", engine_http_status: 429 }))
      )
    })

    it("exposes isRetrySafe only for a preparation_capacity refusal of execution_prepare", () => {
      assert.isTrue(new Outcome.PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" }).isRetrySafe)
      assert.isFalse(new Outcome.PreparationRejected({ operation: "execution_prepare", code: "executor_capacity" }).isRetrySafe)
      assert.isFalse(new Outcome.PreparationRejected({ operation: "execution_start", code: "preparation_capacity" }).isRetrySafe)
    })
  })

  describe("replay after a restart", () => {
    it("round-trips the journal through its schema and projects the same outcome", () => {
      const facts: ReadonlyArray<Fact> = [...started, delta("x", 1), usage(4), error("e", "connection_failed", 503), done({ content: "x" })]
      const codec = Schema.Array(Outcome.TurnFact)
      const stored = JSON.parse(JSON.stringify(Schema.encodeSync(codec)(facts)))
      const replayed = Schema.decodeUnknownSync(codec)(stored)
      assert.deepStrictEqual(Outcome.project(run, replayed), Outcome.project(run, facts))
    })

    it("reads a Dispatching fact without its outcome as 'may have left' and one with NotDispatched as definite", () => {
      const dispatching = (type: Outcome.DispatchType): Fact => ({ _tag: "Dispatching", type })
      const ready = started.slice(0, 3)
      // start being dispatched: unknown, never preparation_interrupted (which says no Run input was submitted)
      assert.deepStrictEqual(settled([...ready, dispatching("execution_start"), lost("core_restarted")]), {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "core_restarted"
      })
      assert.deepStrictEqual(settled([dispatching("execution_prepare"), lost("core_restarted")]), {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "core_restarted"
      })
      assert.deepStrictEqual(settled([dispatching("prompt_request"), lost("core_restarted")]), {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "core_restarted"
      })
      assert.deepStrictEqual(
        settled([dispatching("execution_prepare"), { _tag: "NotDispatched", type: "execution_prepare", reason: "journal_unavailable" }, lost("core_restarted")]),
        { status: "failed", error_code: "delivery_failed", detail: "journal_unavailable" }
      )
      // nothing dispatched at all: observation loss alone settles nothing
      assert.deepStrictEqual(Outcome.project(run, [lost("core_restarted")]), { _tag: "Pending" })
    })

    it("settles an in-flight Turn as event_stream_incomplete with core_restarted", () => {
      assert.deepStrictEqual(settled([...started, delta("x", 1), lost("core_restarted")]), {
        status: "failed",
        error_code: "event_stream_incomplete",
        observation: "core_restarted"
      })
    })
  })
})
