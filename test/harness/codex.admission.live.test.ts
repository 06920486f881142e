/**
 * The real Codex adapter behind the Runtime's Admission, over the in-memory transport: `execution_prepare` for a
 * thread Codex has no rollout for is refused with `history_unavailable` on the wire (structural: the JSON-RPC
 * error of a strict `thread/resume`, before any input), and the app-server it started is gone afterwards; a
 * configuration asking for a capability the declaration lacks never reaches Codex.
 * Real processes and time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { connect, next, prepareFrame, processLayer, same } from "../support/runtimeTestWire.js"
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

  it.live("sub-agent observation is refused before any native call (subagent_observations is declared false)", () =>
    Effect.gen(function* () {
      const { harness } = yield* codexFixture
      assert.isFalse(harness.declaration.capabilities.subagent_observations)
      const before = spawnedCodexPids.length
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: "codex", observe_subagent_identities: true }))
        same((yield* next(core, "preparation_status")).payload, {
          revision: 0, state: "rejected", operation: "execution_prepare", error_code: "unsupported_configuration"
        })
        assert.strictEqual(spawnedCodexPids.length, before, "no app-server was started")
      }).pipe(Effect.provide(processLayer({ harnesses: [harness] })))
    }), 60_000)
})
