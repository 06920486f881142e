/**
 * Issue #17: a kind that declares `local_environment` must not admit a configuration for any Environment while
 * the daemon has no binding check: an `execution_prepare` with a binding is `unsupported_configuration`, a
 * `prompt_request` with one gets `error` then `done`; nothing reaches the Harness.
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Messages } from "../../src/proto/index.js"
import type { Harness } from "../../src/runtime/harness/Harness.js"
import { scriptedCapabilities } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { connect, next, prepareFrame, processLayer, promptFrame, same, silent, text, until } from "../support/runtimeTestWire.js"
import { assert } from "@effect/vitest"

const binding = { id: "e4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", workspace_directory: "/workspace", capability_sources: null }

/** A kind that declares local_environment; preparing it natively would be a bug here. */
const hosted: Harness = {
  declaration: { kind: "hosted", available: true, capabilities: { ...scriptedCapabilities, local_environment: true } },
  prepare: () => Effect.die(new Error("a bound configuration must be refused before native preparation"))
}

const bound = (frame: Messages.CoreToRuntime): Messages.CoreToRuntime => {
  if (frame.type === "execution_prepare") {
    const { disable_execution_environment: _, ...configuration } = frame.payload.configuration
    return { ...frame, payload: { ...frame.payload, configuration: { ...configuration, local_environment: binding } } }
  }
  if (frame.type === "prompt_request") {
    const { disable_execution_environment: _, ...payload } = frame.payload
    return { ...frame, payload: { ...payload, local_environment: binding } }
  }
  throw new Error("unreachable")
}

describe("Environment binding", () => {
  it.effect("refuses a bound execution_prepare and prompt_request for a kind declaring local_environment", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(bound(prepareFrame("prep-1", { agent_kind: "hosted" })))
      same((yield* next(core, "preparation_status")).payload, {
        revision: 0, state: "rejected", operation: "execution_prepare", error_code: "unsupported_configuration"
      })
      yield* core.toRuntime(bound(promptFrame("run-1", text("x"), { agent_kind: "hosted" })))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "an Environment binding cannot be checked by this daemon" } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer({ harnesses: [hosted] }))))
})
