/**
 * The scenario data itself: names, shapes and every template against the wire schemas. A scenario that would
 * fail at replay time for an authoring reason (a free value without a sample, a template that is not a valid
 * message, a missing Connect) fails here first.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { existsSync } from "node:fs"
import { resolve } from "node:path"
import { allScenarios, type Side, stepRunsOn, type WireScenario } from "../../scenarios/index.js"
import { type Bindings, emptyBindings, matchMessage, materialize } from "../../src/conformance/Match.js"
import type { AgentKindCapabilities } from "../../src/proto/Capabilities.js"
import { type PromptRequestPayload, requiredCapabilities } from "../../src/proto/Execution.js"
import * as Messages from "../../src/proto/Messages.js"
import { narrowedCapabilities } from "../../scenarios/Fixtures.js"

const root = resolve(import.meta.dirname, "../..")

/** Walks the frames a scenario has on one side, materializing each with the samples bound so far. */
const framesOf = (scenario: WireScenario, side: Side) => {
  let bindings: Bindings = emptyBindings
  const out: Array<{ readonly step: number; readonly template: unknown; readonly value: unknown }> = []
  scenario.steps.forEach((step, i) => {
    if (!stepRunsOn(step, side)) return
    const templates = step._tag === "Core" || step._tag === "Runtime"
      ? [step.message]
      : step._tag === "Interleave"
      ? step.streams.flat()
      : []
    for (const template of templates) {
      const built = materialize(template, bindings)
      if (Result.isFailure(built)) throw new Error(`${scenario.name} step ${i + 1}: no sample at ${built.failure.path}`)
      bindings = built.success.bindings
      out.push({ step: i + 1, template, value: built.success.value })
    }
  })
  return out
}

describe("wire scenarios", () => {
  it("has at least one scenario for every rule issue 7 lists", () => {
    const names = new Set(allScenarios.map((s) => s.name))
    for (
      const required of [
        "incompatible-version",
        "heartbeat-and-declaration",
        "preparation-ready-start-done",
        "preparation-failure-cleans-up",
        "preparation-capacity",
        "release-before-start",
        "admission-expiry",
        "stale-and-duplicate-handles",
        "duplicate-and-stale-receipts",
        "prompt-request-every-event",
        "error-then-done",
        "usage-snapshots",
        "cancellation-waits-for-settlement",
        "cancellation-settles-without-done",
        "cancel-unconfirmed",
        "connection-loss-no-invented-terminal",
        "reconnection-without-replay",
        "newer-connection-replaces-older",
        "cleanup-failure-kept-and-retried",
        "shutdown",
        "active-input-written-accepted",
        "active-input-write-timeout",
        "active-input-unknown",
        "interaction-decisions-valid",
        "interaction-decisions-invalid",
        "function-results",
        "cancel-timeout-keeps-ownership"
      ]
    ) assert.isTrue(names.has(required), required)
  })

  it("names are unique and each scenario lives in scenarios/<name>.ts", () => {
    const names = allScenarios.map((s) => s.name)
    assert.strictEqual(new Set(names).size, names.length)
    for (const name of names) {
      assert.match(name, /^[a-z0-9]+(-[a-z0-9]+)*$/)
      assert.isTrue(existsSync(resolve(root, "scenarios", `${name}.ts`)), name)
    }
  })

  it("every scenario says which rule it pins and what each side asserts or why it skips", () => {
    for (const s of allScenarios) {
      assert.isAbove(s.description.length, 40, s.name)
      assert.isAbove(s.sections.length, 0, s.name)
      for (const side of ["runtime", "core"] as const) {
        const plan = s.replay[side]
        assert.isAbove(("asserts" in plan ? plan.asserts : plan.skip).length, 10, `${s.name} ${side}`)
      }
      assert.isTrue("asserts" in s.replay.runtime || "asserts" in s.replay.core, `${s.name} is replayed by no side`)
    }
  })

  it("every scenario begins with a Connect step replayed on both sides", () => {
    for (const s of allScenarios) {
      const first = s.steps[0]
      assert.strictEqual(first?._tag, "Connect", s.name)
      assert.isTrue(stepRunsOn(first!, "runtime") && stepRunsOn(first!, "core"), s.name)
    }
  })

  it("every template, with its samples, is a valid message that decodes strictly and matches itself", () => {
    for (const s of allScenarios) {
      for (const side of ["runtime", "core"] as const) {
        if (!("asserts" in s.replay[side])) continue
        for (const { step, template, value } of framesOf(s, side)) {
          const encoded = Messages.encodeMessage(value as Messages.Message)
          assert.isTrue(Result.isSuccess(encoded), `${s.name} (${side}) step ${step}: not a valid message`)
          const text = Result.getOrThrow(encoded)
          const type = (value as { type: string }).type
          const decoded: Result.Result<Messages.Message, unknown> = Messages.isCoreToRuntimeType(type)
            ? Messages.decodeCoreToRuntime(text)
            : Messages.decodeRuntimeToCore(text)
          assert.isTrue(Result.isSuccess(decoded), `${s.name} (${side}) step ${step}: does not decode strictly`)
          const matched = matchMessage(template, Result.getOrThrow(decoded), emptyBindings)
          assert.isTrue(Result.isSuccess(matched), `${s.name} (${side}) step ${step}: does not match its own template`)
        }
      }
    }
  })

  it("steps that only one real side can produce are restricted to the other side", () => {
    for (const s of allScenarios) {
      for (const step of s.steps) {
        if (step._tag === "Core" && step.refusedByCore !== undefined) {
          assert.isTrue(stepRunsOn(step, "core") && stepRunsOn(step, "runtime"), `${s.name}: a refused step runs on both sides`)
        }
        if (step._tag === "Settle") assert.isTrue(stepRunsOn(step, "runtime"), `${s.name}: settlement is the Runtime's`)
      }
    }
  })

  it("every request a scenario sends needs only what the Runtime declared, and Core's opt-ins follow the declaration", () => {
    for (const s of allScenarios) {
      for (const side of ["runtime", "core"] as const) {
        if (!("asserts" in s.replay[side])) continue
        const narrowed = narrowedCapabilities(side === "runtime" ? s.setup?.disabledCapabilities ?? [] : [])
        // A Runtime bound to the workspace fixture declares the workspace capabilities (Workspace.boundCapabilities).
        let declared: AgentKindCapabilities = side === "runtime" && s.setup?.workspace !== undefined
          ? { ...narrowed, local_environment: true, workspace_read_preparation: true, workspace_output_export: true }
          : narrowed
        for (const { step, value } of framesOf(s, side)) {
          const m = value as Messages.Message
          if (m.type === "heartbeat") {
            const kind = m.payload.supported_agent_kinds?.[0]
            if (kind !== undefined && side === "core") declared = kind.capabilities
            continue
          }
          const config: PromptRequestPayload | undefined = m.type === "execution_prepare"
            ? m.payload.configuration
            : m.type === "prompt_request"
            ? m.payload
            : undefined
          if (config === undefined) continue
          for (const capability of requiredCapabilities(config)) {
            assert.isTrue(declared[capability], `${s.name} (${side}) step ${step} needs ${capability}`)
          }
          // The read-only profile (reference §7.1) carries no observation opt-ins at all.
          if (side === "core" && config.workspace_read_only !== true) {
            assert.strictEqual(config.observe_messages === true, declared.message_items, `${s.name} step ${step}: observe_messages`)
          }
        }
      }
    }
  })
})
