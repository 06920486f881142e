import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Messages } from "../../src/proto/index.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { InputContent } from "../../src/proto/MessageInput.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import {
  connect,
  next,
  processLayer,
  promptFrame,
  same,
  script,
  take,
  until
} from "../support/runtimeTestWire.js"
import { remoteImage, validJpeg } from "../support/runtimeImages.js"

const result = (runId: string, delivery: string, callId: string, content: ReadonlyArray<InputContent>, success = true): Messages.CoreToRuntime => ({
  type: "function_result",
  id: unsafeMake.runId(runId),
  payload: { delivery_id: unsafeMake.deliveryId(delivery), call_id: unsafeMake.callId(callId), success, content }
})
const ack = (delivery_id: string, error_code?: string) => ({
  type: "interaction_decision_ack",
  id: "run-1",
  payload: error_code === undefined ? { delivery_id, applied: true } : { delivery_id, applied: false, error_code }
})
const textPart = (text: string): InputContent => ({ type: "input_text", text })
const call = { function_call: { name: "lookup_ticket", arguments: { id: "T-12" } } }
const tools = { function_tools: [{ name: "lookup_ticket", description: "Find a ticket", parameters: { type: "object" } }] }

describe("Functions", () => {
  it.effect("delivers a function result and acknowledges it under the Run id after native application", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call]), tools))
      same(yield* next(core, "function_call"), {
        type: "function_call", id: "run-1", payload: { call_id: "call_1", name: "lookup_ticket", arguments: { id: "T-12" } }
      })
      yield* core.toRuntime(result("run-1", "function:1", "call_1", [textPart("open")]))
      same(yield* take(core, "interaction_decision_ack"), ack("function:1"))
      const frames = yield* until(core, "done")
      same(frames.flatMap((f) => (f.type === "delta" ? [f.payload.delta] : [])), ["result call_1 ok: open"])
      // After done, a repeat of the applied result is answered from the applied-result records; a call the Run
      // never answered is not_pending (docs/wire-decisions.md R14).
      yield* core.toRuntime(result("run-1", "function:1#2", "call_1", [textPart("open")]))
      same(yield* take(core, "interaction_decision_ack"), ack("function:1#2"))
      yield* core.toRuntime(result("run-1", "function:2", "call_2", [textPart("open")]))
      same(yield* take(core, "interaction_decision_ack"), ack("function:2", "not_pending"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("replays an identical result under a new delivery id and refuses a changed one", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call, { hang: true }]), tools))
      yield* next(core, "function_call")
      yield* core.toRuntime(result("run-1", "d-1", "call_1", [textPart("open")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1"))
      yield* core.toRuntime(result("run-1", "d-2", "call_1", [textPart("open")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-2"))
      yield* core.toRuntime(result("run-1", "d-3", "call_1", [textPart("closed")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-3", "decision_conflict"))
      yield* core.toRuntime(result("run-1", "d-4", "call_1", [textPart("open")], false))
      same(yield* take(core, "interaction_decision_ack"), ack("d-4", "decision_conflict"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("refuses invalid content, unknown calls and Runs, and keeps the route after a native failure", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ fail_submissions: 1 }, call, { hang: true }]), tools))
      yield* next(core, "function_call")
      yield* core.toRuntime(result("run-1", "d-1", "call_1", [{ type: "input_image", image_url: " " }]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1", "invalid_result"))
      yield* core.toRuntime(result("run-1", "d-2", "call_9", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-2", "not_pending"))
      yield* core.toRuntime(result("run-9", "d-3", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), { ...ack("d-3", "not_pending"), id: "run-9" })
      yield* core.toRuntime(result("run-1", "d-4", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-4", "runtime_error"))
      yield* core.toRuntime(result("run-1", "d-5", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-5"))
      // A call id is not a delivery id or an input id: the same string as a delivery id changes nothing.
      yield* core.toRuntime(result("run-1", "call_1", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("call_1"))
    }).pipe(Effect.provide(processLayer())))

  it.effect("a result whose content does not decode is invalid_result when its ids are known; the call stays pending", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call]), tools))
      yield* next(core, "function_call")
      const raw = (payload: unknown) => JSON.stringify({ type: "function_result", id: "run-1", payload })
      yield* core.toRuntime(raw({ delivery_id: "d-1", call_id: "call_1", success: true, content: [{ type: "input_text" }] }))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1", "invalid_result"))
      yield* core.toRuntime(raw({ delivery_id: "d-2", call_id: "call_1", success: true, content: "open" }))
      same(yield* take(core, "interaction_decision_ack"), ack("d-2", "invalid_result"))
      // Without a readable delivery id nothing can be acknowledged: no reply.
      yield* core.toRuntime(raw({ call_id: "call_1", success: true, content: "open" }))
      yield* core.toRuntime(result("run-1", "d-3", "call_1", [textPart("open")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-3"))
      const frames = yield* until(core, "done")
      same(frames.flatMap((f) => (f.type === "delta" ? [f.payload.delta] : [])), ["result call_1 ok: open"])
    }).pipe(Effect.provide(processLayer())))

  it.effect("a result image outside the public inline profile is invalid_result; the call stays pending", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call]), tools))
      yield* next(core, "function_call")
      yield* core.toRuntime(result("run-1", "d-1", "call_1", [textPart("see "), { type: "input_image", image_url: remoteImage }]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1", "invalid_result"))
      yield* core.toRuntime(result("run-1", "d-2", "call_1", [textPart("see "), { type: "input_image", image_url: validJpeg }]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-2"))
      const frames = yield* until(core, "done")
      same(frames.flatMap((f) => (f.type === "delta" ? [f.payload.delta] : [])), ["result call_1 ok: see [image]"])
    }).pipe(Effect.provide(processLayer())))

  it.effect("checks the admitted snapshot: function_tools, result images and contract violations", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call, { hang: true }])))
      yield* next(core, "function_call")
      yield* core.toRuntime(result("run-1", "d-1", "call_1", [{ type: "input_image", image_url: "data:image/png;base64,AA==" }]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1", "unsupported"))
      yield* core.toRuntime(result("run-1", "d-2", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-2", "contract_violation"))
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["function_result_images"], contractViolations: ["function_result"] } }))))

  it.effect("needs function_tools, and a Turn (not_ready while the Run is still preparing)", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call]), { agent_options: { scripted: { prepare_wait: "p" } } }))
      yield* core.toRuntime(result("run-1", "d-1", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1", "unsupported"))
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["function_tools"] } }))))

  it.effect("a result before the Turn exists is not_ready", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([call]), { ...tools, agent_options: { scripted: { prepare_wait: "p" } } }))
      yield* core.toRuntime(result("run-1", "d-1", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-1", "not_ready"))
      const signals = yield* ScriptedSignals
      yield* signals.fire("p")
      yield* next(core, "function_call")
      yield* core.toRuntime(result("run-1", "d-2", "call_1", [textPart("x")]))
      same(yield* take(core, "interaction_decision_ack"), ack("d-2"))
    }).pipe(Effect.provide(processLayer())))
})
