/**
 * The real Codex adapter behind the Runtime's Admission, over the in-memory transport: `execution_prepare` for a
 * thread Codex has no rollout for is refused with `history_unavailable` on the wire (structural: the JSON-RPC
 * error of a strict `thread/resume`, before any input), and the app-server it started is gone afterwards; a
 * configuration asking for a capability the declaration lacks never reaches Codex; a Run that opts in to
 * sub-agent observations gets the spawned child as `subagent_*` frames.
 * Real processes and time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { connect, next, prepareFrame, processLayer, same, startFrame, text, until } from "../support/runtimeTestWire.js"
import { codexFixture, codexProcesses, spawnedCodexPids } from "../support/fakeResponsesCodex.js"

describe("codex through Admission (real binary)", () => {
  it.live("an unknown native thread is history_unavailable on the wire, and the preparation leaves no process", () =>
    Effect.gen(function* () {
      const { harness, profile } = yield* codexFixture
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(prepareFrame("prep-1", {
          agent_kind: "codex",
          agent_session_id: "01a23224-0000-7000-8000-000000000000",
          strict_resume: true
        }))
        same((yield* next(core, "preparation_status")).payload.state, "preparing")
        same((yield* next(core, "preparation_status")).payload, {
          executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: "history_unavailable"
        })
        assert.deepStrictEqual(codexProcesses(profile), [])
      }).pipe(Effect.provide(processLayer({ harnesses: [harness] })))
    }), 60_000)

  it.live("a capability the declaration lacks (text verbosity) is refused before any native call", () =>
    Effect.gen(function* () {
      const { harness } = yield* codexFixture
      assert.isFalse(harness.declaration.capabilities.text_verbosity)
      const before = spawnedCodexPids.length
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: "codex", execution_controls: { web_search: "disabled", text_verbosity: "high" } }))
        same((yield* next(core, "preparation_status")).payload, {
          revision: 0, state: "rejected", operation: "execution_prepare", error_code: "unsupported_configuration"
        })
        assert.strictEqual(spawnedCodexPids.length, before, "no app-server was started")
      }).pipe(Effect.provide(processLayer({ harnesses: [harness] })))
    }), 60_000)

  it.live("with observe_subagent_identities a spawned Codex sub-agent reaches Core as subagent_* frames of the Run", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* codexFixture
      assert.isTrue(harness.declaration.capabilities.subagent_observations)
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: "codex", observe_subagent_identities: true, observe_messages: true }))
        same((yield* next(core, "preparation_status")).payload.state, "preparing")
        same((yield* next(core, "preparation_status")).payload.state, "ready")
        yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("SPAWN:CHILD count the stars")))
        const frames = yield* until(core, "done")
        const types = frames.map((f) => f.type)
        const identity = frames.find((f) => f.type === "subagent_identity")
        assert.isDefined(identity, types.join(","))
        const child = (identity!.payload as { native_id: string }).native_id
        same(identity!.payload, {
          native_id: child,
          parent_native_id: (identity!.payload as { parent_native_id: string }).parent_native_id,
          native_created_at: (identity!.payload as { native_created_at: number }).native_created_at,
          parent_turn_id: (identity!.payload as { parent_turn_id: string }).parent_turn_id,
          source_item_id: "call_1",
          name: null,
          instructions: "CHILD count the stars"
        })
        // Identity first: nothing about the child precedes it.
        const first = frames.findIndex((f) => f.type !== "subagent_coordination" && f.type.startsWith("subagent_"))
        assert.strictEqual(frames[first]!.type, "subagent_identity")
        const item = frames.find((f) => f.type === "subagent_item")
        assert.deepInclude(item!.payload as object, { native_id: child, kind: "output_message", position: 0 })
        assert.deepInclude((item!.payload as { payload: object }).payload, { status: "completed", text: "echo: CHILD count the stars" })
        const turns = frames.filter((f) => f.type === "subagent_turn").map((f) => (f.payload as { status: string }).status)
        assert.deepStrictEqual(turns, ["in_progress", "completed"])
        assert.isTrue(frames.some((f) => f.type === "subagent_coordination" && (f.payload as { kind: string }).kind === "create_subagent_call"))
        // The child's words reached Core only inside subagent_item: never as the Run's own output.
        for (const f of frames) {
          if (f.type === "delta") assert.notInclude((f.payload as { delta: string }).delta, "echo: CHILD")
        }
        // The child really ran: the fake model served the child's own request.
        assert.isTrue(fake.requests().some((r) => JSON.stringify(r.body.input).includes("CHILD count the stars") && !JSON.stringify(r.body.input).includes("SPAWN:")))
      }).pipe(Effect.provide(processLayer({ harnesses: [harness] })))
    }), 120_000)
})
