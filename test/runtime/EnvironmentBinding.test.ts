/**
 * Issue #13, Environment binding: a daemon is bound to at most one local Environment. Admission checks every
 * `local_environment` (id, workspace_directory, network policy) against the binding; without a binding a kind
 * declaring `local_environment` still refuses any Environment (nothing can check it); the scripted kind
 * declares the three workspace capabilities only when bound, and its Turns run in the workspace root.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { NodeFileSystem } from "@effect/platform-node"
import type { Messages } from "../../src/proto/index.js"
import type { LocalEnvironment } from "../../src/proto/Execution.js"
import type { Harness } from "../../src/runtime/harness/Harness.js"
import { scriptedCapabilities, scriptedDeclaration } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { checkBinding, resolveBinding } from "../../src/runtime/workspace/EnvironmentBinding.js"
import { connect, next, prepareFrame, processLayer, promptFrame, same, script, silent, text, until } from "../support/runtimeTestWire.js"
import { tempWorkspace } from "../support/workspaceDir.js"

const binding = { id: "e4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", workspace_directory: "/workspace", capability_sources: null }

/** A kind that declares local_environment; preparing it natively would be a bug here. */
const hosted: Harness = {
  declaration: { kind: "hosted", available: true, capabilities: { ...scriptedCapabilities, local_environment: true } },
  prepare: () => Effect.die(new Error("a bound configuration must be refused before native preparation"))
}

const bound = (frame: Messages.CoreToRuntime, local: LocalEnvironment = binding): Messages.CoreToRuntime => {
  if (frame.type === "execution_prepare") {
    const { disable_execution_environment: _, ...configuration } = frame.payload.configuration
    return { ...frame, payload: { ...frame.payload, configuration: { ...configuration, local_environment: local } } }
  }
  if (frame.type === "prompt_request") {
    const { disable_execution_environment: _, ...payload } = frame.payload
    return { ...frame, payload: { ...payload, local_environment: local } }
  }
  throw new Error("unreachable")
}

const rejected = (code: string) => ({ revision: 0, state: "rejected", operation: "execution_prepare", error_code: code })

describe("Environment binding", () => {
  it.effect("without a binding: a bound execution_prepare and prompt_request are refused, nothing reaches the Harness", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(bound(prepareFrame("prep-1", { agent_kind: "hosted" })))
      same((yield* next(core, "preparation_status")).payload, rejected("unsupported_configuration"))
      yield* core.toRuntime(bound(promptFrame("run-1", text("x"), { agent_kind: "hosted" })))
      same(yield* until(core, "done"), [
        { type: "error", id: "run-1", payload: { error: "this daemon is bound to no Environment" } },
        { type: "done", id: "run-1", payload: { content: "" } }
      ])
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer({ harnesses: [hosted] }))))

  it("the scripted kind declares the workspace capabilities only with a binding", () => {
    const caps = ["local_environment", "workspace_read_preparation", "workspace_output_export"] as const
    const unbound = scriptedDeclaration({})
    const boundDecl = scriptedDeclaration({ workspaceRoot: "/w" })
    for (const c of caps) {
      assert.isFalse(unbound.capabilities[c], c)
      assert.isTrue(boundDecl.capabilities[c], c)
    }
    assert.isFalse(boundDecl.capabilities.workspace_authoring)
    assert.isFalse(scriptedDeclaration({ workspaceRoot: "/w", disabledCapabilities: ["local_environment"] }).capabilities.local_environment)
  })

  it("checkBinding compares id, workspace directory (root or configured form) and network policy exactly", () => {
    const b = Option.some({ environmentId: "env-1", root: "/real/ws", configured: "/link/ws", networkAccess: "disabled" as const })
    const local = (o: Partial<LocalEnvironment>): LocalEnvironment => ({ id: "env-1", workspace_directory: "/real/ws", capability_sources: null, ...o })
    same(checkBinding(b, local({})), Option.none())
    same(checkBinding(b, local({ workspace_directory: "/link/ws" })), Option.none())
    same(checkBinding(b, local({ network_access: "disabled" })), Option.none())
    same(checkBinding(b, local({ id: "env-2" })), Option.some("environment_id"))
    same(checkBinding(b, local({ workspace_directory: "/real/ws/" })), Option.some("workspace_directory"))
    same(checkBinding(b, local({ workspace_directory: "/real" })), Option.some("workspace_directory"))
    same(checkBinding(b, local({ network_access: "enabled" })), Option.some("network_access"))
    same(checkBinding(Option.none(), local({})), Option.some("no_binding"))
  })

  it.effect("with a binding: the matching Environment is admitted, any other is invalid_configuration", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(bound(prepareFrame("prep-ok"), ws.local))
        same((yield* next(core, "preparation_status")).payload.state, "preparing")
        same((yield* next(core, "preparation_status")).payload.state, "ready")
        for (const [i, other] of [
          { ...ws.local, id: "f4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9" },
          { ...ws.local, workspace_directory: "/tmp" },
          { ...ws.local, network_access: "enabled" as const }
        ].entries()) {
          yield* core.toRuntime(bound(prepareFrame(`prep-${i}`, {}, "c0a4c7e2-6d1f-4a53-9a7e-1f2d3c4b5a6" + i), other))
          same((yield* next(core, "preparation_status")).payload, rejected("invalid_configuration"))
        }
        yield* core.toRuntime(bound(promptFrame("run-x", text("x")), { ...ws.local, id: "other" }))
        same(yield* until(core, "done"), [
          { type: "error", id: "run-x", payload: { error: "the Environment is not this daemon's binding" } },
          { type: "done", id: "run-x", payload: { content: "" } }
        ])
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))

  it.effect("a bound scripted Turn writes and reads a file in the workspace root", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(bound(promptFrame("run-1", script([
          { write_file: { path: "notes/hello.txt", text: "hello, workspace" } },
          { read_file: "notes/hello.txt" },
          { read_file: "../escape" }
        ])), ws.local))
        const frames = yield* until(core, "done")
        same(frames.map((f) => [f.type, f.type === "delta" ? f.payload.delta : f.type === "error" ? f.payload.error : ""]), [
          ["delta", "hello, workspace"],
          ["error", "read_file failed: invalid_path"],
          ["done", ""]
        ])
        assert.strictEqual(Fs.readFileSync(Path.join(ws.root, "notes/hello.txt"), "utf8"), "hello, workspace")
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))
})

describe("resolveBinding", () => {
  const run = (input: { environmentId?: string; workspace?: string; networkAccess?: string }) =>
    resolveBinding({
      environmentId: Option.fromNullishOr(input.environmentId),
      workspace: Option.fromNullishOr(input.workspace),
      networkAccess: Option.fromNullishOr(input.networkAccess)
    }, (p) => Path.resolve(p)).pipe(Effect.provide(NodeFileSystem.layer))

  it.effect("no settings: no binding; the real path of the workspace is the root", () =>
    Effect.gen(function* () {
      assert.isUndefined(yield* run({}))
      const ws = yield* tempWorkspace
      const link = `${ws.root}-link`
      Fs.symlinkSync(ws.root, link)
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(link)))
      const b = yield* run({ environmentId: "env-1", workspace: link })
      same(b, { environmentId: "env-1", root: ws.root, configured: link, networkAccess: "disabled" })
      same((yield* run({ environmentId: "env-1", workspace: ws.root, networkAccess: "restricted" }))?.networkAccess, "restricted")
    }))

  it.effect("refuses incomplete, invalid or missing settings, naming the flag and variable", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("file"), "x")
      const cases: Array<[Parameters<typeof run>[0], string]> = [
        [{ networkAccess: "enabled" }, "--network-access / AGENTWIRE_NETWORK_ACCESS"],
        [{ environmentId: "env-1" }, "--workspace / AGENTWIRE_WORKSPACE"],
        [{ workspace: ws.root }, "--environment-id / AGENTWIRE_ENVIRONMENT_ID"],
        [{ environmentId: "env 1", workspace: ws.root }, "--environment-id / AGENTWIRE_ENVIRONMENT_ID"],
        [{ environmentId: "x".repeat(129), workspace: ws.root }, "--environment-id / AGENTWIRE_ENVIRONMENT_ID"],
        [{ environmentId: "env-1", workspace: ws.root, networkAccess: "open" }, "--network-access / AGENTWIRE_NETWORK_ACCESS"],
        [{ environmentId: "env-1", workspace: ws.at("missing") }, "--workspace / AGENTWIRE_WORKSPACE"],
        [{ environmentId: "env-1", workspace: ws.at("file") }, "--workspace / AGENTWIRE_WORKSPACE"]
      ]
      for (const [input, setting] of cases) {
        const e = yield* Effect.flip(run(input))
        same(e.setting, setting, JSON.stringify(input))
      }
    }))
})
