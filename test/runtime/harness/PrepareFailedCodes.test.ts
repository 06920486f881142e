/**
 * Every `PrepareFailed` code an adapter can report reaches Core unchanged through Admission: a structural
 * `history_unavailable` stays `history_unavailable` on the wire, a failure without a code is
 * `preparation_failed`. Driven over the in-memory transport with a stub Harness per code (TestClock); the same
 * path with the real Codex binary is test/harness/codex.admission.live.test.ts.
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type Harness, PrepareFailed } from "../../../src/runtime/harness/Harness.js"
import { declaration } from "../../support/capabilities.js"
import { connect, next, prepareFrame, processLayer, same } from "../../support/runtimeTestWire.js"

/** Each code `PrepareFailed` can carry, with the wire code Admission must publish for it. */
const codes: ReadonlyArray<readonly [PrepareFailed["code"], string]> = [
  ["history_unavailable", "history_unavailable"],
  [undefined, "preparation_failed"]
]

const failing = (code: PrepareFailed["code"]): Harness => ({
  declaration: { kind: "stub", available: true, capabilities: declaration({ preparation: true, environment_none: true, tool_observations: true, execution_controls: true, resume: true, durable_turns: true }) },
  prepare: () => Effect.fail(new PrepareFailed({ reason: "stub", ...(code === undefined ? {} : { code }) }))
})

describe("PrepareFailed codes through Admission", () => {
  for (const [code, wire] of codes) {
    it.effect(`PrepareFailed ${code ?? "(no code)"} is published as ${wire}`, () =>
      Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: "stub", agent_session_id: "native-1" }))
        same((yield* next(core, "preparation_status")).payload.state, "preparing")
        same((yield* next(core, "preparation_status")).payload, {
          executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: wire
        })
      }).pipe(Effect.provide(processLayer({ harnesses: [failing(code)] }))))
  }
})
