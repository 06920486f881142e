import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Result, Scope } from "effect"
import { capabilityNames } from "../../../src/proto/Capabilities.js"
import {
  CapabilityUnsupported,
  ContractViolation,
  guarded,
  type Harness,
  HarnessEntry,
  NativeFailed,
  OperationUnsupported
} from "../../../src/runtime/harness/Harness.js"
import { entriesFor, harnessKindNames } from "../../../src/runtime/harness/HarnessKinds.js"
import { HarnessRegistry, toDescriptor } from "../../../src/runtime/harness/HarnessRegistry.js"
import { ScriptedSignals } from "../../../src/runtime/harness/scripted/ScriptedSignals.js"
import { scriptedDeclaration } from "../../../src/runtime/harness/scripted/ScriptedHarness.js"
import { StatusBoard } from "../../../src/runtime/StatusBoard.js"
import { declaration } from "../../support/capabilities.js"
import { connect, processLayer, same } from "../../support/runtimeTestWire.js"

const harness = (kind: string, capabilities: unknown): Harness => ({
  declaration: { kind, available: true, capabilities: capabilities as Harness["declaration"]["capabilities"] },
  prepare: () => Effect.die("unused")
})

describe("HarnessRegistry", () => {
  it.effect("validates a complete declaration before changing anything", () =>
    Effect.gen(function* () {
      const registry = yield* HarnessRegistry.make([harness("a", declaration({ streaming: true }))])
      const { permissions: _dropped, ...incomplete } = declaration()
      const failures = [
        harness("b", incomplete),
        harness("b", { ...declaration(), extra: true }),
        harness("b", { ...declaration(), steering: null }),
        harness("", declaration()),
        harness("b", undefined)
      ]
      for (const h of failures) {
        const exit = yield* Effect.exit(registry.register(h))
        assert.isTrue(Exit.isFailure(exit))
      }
      assert.deepStrictEqual((yield* registry.declarations).map((d) => d.kind), ["a"])
      assert.isTrue(Option.isNone(yield* registry.get("b")))
      yield* registry.register(harness("b", declaration()))
      assert.deepStrictEqual((yield* registry.declarations).map((d) => d.kind), ["a", "b"])
    }))

  it("an incomplete declaration never encodes into a heartbeat descriptor", () => {
    const { usage: _u, ...incomplete } = declaration()
    assert.isTrue(Result.isFailure(toDescriptor({ kind: "x", available: true, capabilities: incomplete as never })))
    const ok = toDescriptor(scriptedDeclaration({ disabledCapabilities: ["usage"] }))
    assert.isTrue(Result.isSuccess(ok))
    if (Result.isSuccess(ok)) {
      assert.deepStrictEqual(Object.keys(ok.success.capabilities), [...capabilityNames])
      assert.isFalse(ok.success.capabilities.usage)
    }
  })
})

describe("HarnessRegistry.layerFrom", () => {
  it.effect("builds each entry's Layer once in the layer's scope and releases what it acquired when the layer closes", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const construct = (kind: string) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            events.push(`start ${kind}`)
            return harness(kind, declaration())
          }),
          () => Effect.sync(() => void events.push(`stop ${kind}`))
        )
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(HarnessRegistry.layerFrom([HarnessEntry.layer(construct("a")), HarnessEntry.layer(construct("b"))]), scope)
      const registry = Context.get(context, HarnessRegistry)
      assert.deepStrictEqual((yield* registry.declarations).map((d) => d.kind), ["a", "b"])
      assert.deepStrictEqual(events, ["start a", "start b"])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(events, ["start a", "start b", "stop b", "stop a"])
    }))

  it.effect("every kind of the table (scripted, codex, claude_code) is a registry entry Layer, built at start and torn down at shutdown", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual([...harnessKindNames], ["scripted", "codex", "claude_code"])
      const entries = entriesFor(harnessKindNames, {})
      for (const entry of entries) assert.isTrue(Layer.isLayer(entry))
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        HarnessRegistry.layerFrom(entries).pipe(Layer.provide(ScriptedSignals.layer)),
        scope
      )
      const kinds = (yield* Context.get(context, HarnessRegistry).declarations).map((d) => [d.kind, d.available])
      // Unconfigured codex and claude_code register as unavailable (declared, never advertised as runnable).
      assert.deepStrictEqual(kinds, [["scripted", true], ["codex", false], ["claude_code", false]])
      yield* Scope.close(scope, Exit.void)
    }))

  const unavailable: Harness = {
    declaration: {
      kind: "missing",
      available: false,
      version: "0.0.0",
      unavailableReason: "binary \u001b[31mnot found\u0007 on PATH",
      capabilities: declaration()
    },
    prepare: () => Effect.die("unused")
  }
  it.effect("shows an unavailable kind's reason in the status (sanitized) and never sends it on the wire", () =>
    Effect.gen(function* () {
      const { heartbeat } = yield* connect()
      assert.isFalse(JSON.stringify(heartbeat).includes("not found"))
      const kinds = (yield* (yield* StatusBoard).snapshot).kinds
      same(kinds.find((k) => k.kind === "missing"), {
        kind: "missing",
        available: false,
        version: "0.0.0",
        unavailable_reason: "binary [31mnot found on PATH",
        supported: []
      })
    }).pipe(Effect.provide(processLayer({ harnesses: [unavailable] }))))
})

describe("Harness guards", () => {
  const snapshot = scriptedDeclaration({ disabledCapabilities: ["permissions"] })

  it.effect("checks the admitted snapshot before any native call", () =>
    Effect.gen(function* () {
      let called = false
      const exit = yield* Effect.exit(guarded(snapshot, "permissions", Effect.sync(() => {
        called = true
      })))
      assert.deepStrictEqual(exit, Exit.fail(new CapabilityUnsupported({ capability: "permissions" })))
      assert.isFalse(called)
    }))

  it.effect("turns a declared operation that answers unsupported into a contract violation, and keeps other errors", () =>
    Effect.gen(function* () {
      const violation = yield* Effect.exit(guarded(snapshot, "steering", Effect.fail(new OperationUnsupported({ operation: "steer" }))))
      assert.deepStrictEqual(violation, Exit.fail(new ContractViolation({ operation: "steer" })))
      const failed = yield* Effect.exit(guarded(snapshot, "steering", Effect.fail(new NativeFailed({ operation: "steer", reason: "x" }))))
      assert.deepStrictEqual(failed, Exit.fail(new NativeFailed({ operation: "steer", reason: "x" })))
    }))
})
