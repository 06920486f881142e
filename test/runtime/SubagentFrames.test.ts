/**
 * Sub-agent Turn events become `subagent_*` frames (Envelope.id = the Run id) only for a Run that opted in with
 * `observe_subagent_identities`; without the opt-in the Runtime drops them whatever the adapter emits.
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { TurnEvent } from "../../src/runtime/harness/Harness.js"
import { eventHarness } from "../support/runtimeEventHarness.js"
import { connect, processLayer, promptFrame, same, script, until } from "../support/runtimeTestWire.js"

const identity = {
  native_id: "child-1",
  parent_native_id: "thread-1",
  native_created_at: 1767225600,
  parent_turn_id: "turn-1",
  source_item_id: "call_1",
  name: null,
  instructions: "look around"
}
const lifecycle = { native_id: "child-1", effect_id: "call_1:child-1:running", status: "running", occurred_at_ms: 1767225600100 }
const turn = {
  native_id: "child-1",
  turn_id: "child-turn-1",
  status: "completed",
  created_at_ms: 1767225600000,
  started_at_ms: 1767225600000,
  completed_at_ms: 1767225601000,
  usage: null
}
const item = {
  native_id: "child-1",
  turn_id: "child-turn-1",
  item_id: "msg_1",
  position: 0,
  kind: "output_message",
  payload: { id: "msg_1", status: "completed", text: "hi" }
}
const coordination = {
  id: "call_1",
  kind: "create_subagent_call",
  status: "completed",
  actor_id: "",
  recipients: ["child-1"],
  text: "look around",
  model: "m",
  reasoning_effort: null
}

const events: ReadonlyArray<TurnEvent> = [
  { type: "subagent_coordination", payload: coordination },
  { type: "subagent_identity", payload: identity },
  { type: "subagent_lifecycle", payload: lifecycle },
  { type: "subagent_turn", payload: turn },
  { type: "subagent_item", payload: item },
  { type: "delta", delta: "parent" }
]

const layer = processLayer({ harnesses: [eventHarness("multi", events, { content: "parent" }, { subagent_observations: true })] })

describe("sub-agent frames", () => {
  it.effect("with observe_subagent_identities: every subagent_* event is a frame of the Run, in order", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([]), { agent_kind: "multi", observe_subagent_identities: true }))
      same(yield* until(core, "done"), [
        { type: "subagent_coordination", id: "run-1", payload: coordination },
        { type: "subagent_identity", id: "run-1", payload: identity },
        { type: "subagent_lifecycle", id: "run-1", payload: lifecycle },
        { type: "subagent_turn", id: "run-1", payload: turn },
        { type: "subagent_item", id: "run-1", payload: item },
        { type: "delta", id: "run-1", payload: { delta: "parent", sequence: 1 } },
        { type: "done", id: "run-1", payload: { content: "parent" } }
      ])
    }).pipe(Effect.provide(layer)))

  it.effect("without the opt-in the Runtime drops them, whatever the adapter emits", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([]), { agent_kind: "multi" }))
      same(yield* until(core, "done"), [
        { type: "delta", id: "run-1", payload: { delta: "parent", sequence: 1 } },
        { type: "done", id: "run-1", payload: { content: "parent" } }
      ])
    }).pipe(Effect.provide(layer)))
})
