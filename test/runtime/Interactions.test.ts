import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Messages } from "../../src/proto/index.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { MemoryTransport } from "../support/runtimeMemoryTransport.js"
import {
  adjust,
  connect,
  next,
  processLayer,
  promptFrame,
  same,
  script,
  silent,
  take,
  until
} from "../support/runtimeTestWire.js"

const permissionDecision = (id: string, delivery: string, approved: boolean, message?: string): Messages.CoreToRuntime => ({
  type: "permission_decision",
  id: unsafeMake.interactionId(id),
  payload: { delivery_id: unsafeMake.deliveryId(delivery), approved, ...(message === undefined ? {} : { message }) }
})

const choice = (id: string, delivery: string, rest: Record<string, unknown>): Messages.CoreToRuntime => ({
  type: "prompt_for_user_choice_decision",
  id: unsafeMake.interactionId(id),
  payload: { delivery_id: unsafeMake.deliveryId(delivery), ...rest }
})

const ackOf = (core: MemoryTransport) => take(core, "interaction_decision_ack")
const applied = (id: string, delivery_id: string) => ({ type: "interaction_decision_ack", id, payload: { delivery_id, applied: true } })
const refused = (id: string, delivery_id: string, error_code: string) => ({
  type: "interaction_decision_ack", id, payload: { delivery_id, applied: false, error_code }
})

const ask = {
  ask: {
    questions: [
      { id: "q1", header: "Branch", question: "Which branch?", options: [{ label: "main" }, { label: "dev" }] },
      { id: "q2", question: "Why?", options: [], is_other: true }
    ]
  }
}

describe("Interactions", () => {
  it.effect("applies a permission decision after native acceptance; an identical retry is applied again, a change conflicts", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ permission: { tool: "Bash", title: "rm -rf build", payload: { cmd: "rm" } } }])))
      same(yield* next(core, "permission_request"), {
        type: "permission_request", id: "run-1", payload: { request_id: "perm_1", tool: "Bash", title: "rm -rf build", payload: { cmd: "rm" } }
      })
      yield* core.toRuntime(permissionDecision("perm_1", "d-1", true))
      same(yield* ackOf(core), applied("perm_1", "d-1"))
      assert.strictEqual((yield* take(core, "done")).payload.content, "permission perm_1: approved")
      yield* core.toRuntime(permissionDecision("perm_1", "d-2", true))
      same(yield* ackOf(core), applied("perm_1", "d-2"))
      yield* core.toRuntime(permissionDecision("perm_1", "d-3", false))
      same(yield* ackOf(core), refused("perm_1", "d-3", "decision_conflict"))
      yield* core.toRuntime(permissionDecision("perm_1", "d-4", true, "with a message"))
      same(yield* ackOf(core), refused("perm_1", "d-4", "decision_conflict"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("a native submission failure is runtime_error and keeps the route for a retry", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ fail_submissions: 1 }, { permission: { tool: "t", title: "x" } }])))
      yield* next(core, "permission_request")
      yield* core.toRuntime(permissionDecision("perm_1", "d-1", false))
      same(yield* ackOf(core), refused("perm_1", "d-1", "runtime_error"))
      yield* core.toRuntime(permissionDecision("perm_1", "d-2", false))
      same(yield* ackOf(core), applied("perm_1", "d-2"))
      assert.strictEqual((yield* until(core, "done")).some((f) => f.type === "delta" && f.payload.delta === "permission perm_1: denied"), true)
    }).pipe(Effect.provide(processLayer())))

  it.effect("a native withdrawal sends permission_cancel; a later decision is not_pending", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ permission: { tool: "t", title: "x", withdraw_after: "30 seconds" } }, { hang: true }])))
      yield* next(core, "permission_request")
      yield* adjust(29_999)
      assert.isTrue(yield* silent(core))
      yield* adjust(1)
      same(yield* next(core, "permission_cancel"), { type: "permission_cancel", id: "perm_1" })
      yield* core.toRuntime(permissionDecision("perm_1", "d-1", true))
      same(yield* ackOf(core), refused("perm_1", "d-1", "not_pending"))
      yield* core.toRuntime(permissionDecision("perm_unknown", "d-2", true))
      same(yield* ackOf(core), refused("perm_unknown", "d-2", "not_pending"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("decisions need permissions in the admitted snapshot (both kinds)", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ permission: { tool: "t", title: "x" } }])))
      yield* next(core, "permission_request")
      yield* core.toRuntime(permissionDecision("perm_1", "d-1", true))
      same(yield* ackOf(core), refused("perm_1", "d-1", "unsupported"))
      yield* core.toRuntime(promptFrame("run-2", script([ask])))
      yield* next(core, "prompt_for_user_choice")
      yield* core.toRuntime(choice("ask_1", "d-2", { question_answers: [{ question_id: "q1", answers: ["main"] }] }))
      same(yield* ackOf(core), refused("ask_1", "d-2", "unsupported"))
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["permissions"] } }))))

  it.effect("a declared operation answering unsupported is a contract violation", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ permission: { tool: "t", title: "x" } }])))
      yield* next(core, "permission_request")
      yield* core.toRuntime(permissionDecision("perm_1", "d-1", true))
      same(yield* ackOf(core), refused("perm_1", "d-1", "contract_violation"))
    }).pipe(Effect.provide(processLayer({ scripted: { contractViolations: ["permission"] } }))))

  it.effect("applies a user-choice answer keyed by question id; omitted questions stay unanswered", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([ask, ask])))
      const emitted = yield* next(core, "prompt_for_user_choice")
      same(emitted.payload.questions.map((q) => q.id), ["q1", "q2"])
      yield* core.toRuntime(choice("ask_1", "d-1", { question_answers: [{ question_id: "q2", answers: [] }, { question_id: "q1", answers: ["dev"] }] }))
      same(yield* ackOf(core), applied("ask_1", "d-1"))
      yield* take(core, "prompt_for_user_choice")
      yield* core.toRuntime(choice("ask_2", "d-2", { cancelled: true, reason: "timeout" }))
      same(yield* ackOf(core), applied("ask_2", "d-2"))
      const frames = yield* until(core, "done")
      const deltas = frames.flatMap((f) => (f.type === "delta" ? [f.payload.delta] : []))
      same(deltas, ["answer ask_1: q2=; q1=dev", "answer ask_2: cancelled"])
    }).pipe(Effect.provide(processLayer())))

  it.effect("rejects every invalid answer shape with invalid_decision before any native submission", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([ask])))
      yield* next(core, "prompt_for_user_choice")
      const invalid: ReadonlyArray<Record<string, unknown>> = [
        { question_answers: [{ question_id: "q9", answers: ["x"] }] }, // not an emitted question
        { question_answers: [{ question_id: "q1", answers: ["a"] }, { question_id: "q1", answers: ["b"] }] }, // repeated
        { question_answers: [{ question_id: "  ", answers: ["a"] }] }, // blank
        { cancelled: true, question_answers: [{ question_id: "q1", answers: ["a"] }] } // cancellation with answers
      ]
      for (const [i, rest] of invalid.entries()) {
        yield* core.toRuntime(choice("ask_1", `d-${i}`, rest))
        same(yield* ackOf(core), refused("ask_1", `d-${i}`, "invalid_decision"))
      }
      // Shapes that do not decode, or lack a delivery id, get no ack at all.
      yield* core.toRuntime(`{"type":"prompt_for_user_choice_decision","id":"ask_1","payload":{"question_answers":[{"question_id":"q1","answers":["a"]}]}}`)
      yield* core.toRuntime(`{"type":"prompt_for_user_choice_decision","id":"ask_1","payload":{"delivery_id":"d-x","question_answers":[{"question_id":"q1","answers":null}]}}`)
      yield* core.toRuntime(`{"type":"prompt_for_user_choice_decision","id":"ask_1","payload":{"delivery_id":"d-y","question_answers":[{"question_id":"q1","answer":"a"}]}}`)
      yield* core.toRuntime(`{"type":"prompt_for_user_choice_decision","id":"ask_1","payload":{"delivery_id":"d-z","answers":["a"]}}`)
      assert.isTrue(yield* silent(core))
      // Nothing was consumed: a valid answer still applies.
      yield* core.toRuntime(choice("ask_1", "d-ok", { question_answers: [{ question_id: "q1", answers: ["main"] }] }))
      same(yield* ackOf(core), applied("ask_1", "d-ok"))
      // A permission decision for an ask id is not pending (decisions never cross kinds).
      yield* core.toRuntime(permissionDecision("ask_1", "d-p", true))
      same(yield* ackOf(core), refused("ask_1", "d-p", "not_pending"))
    }).pipe(Effect.provide(processLayer())))
})
