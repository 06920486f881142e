/**
 * The `codex` Harness against the pinned real Codex binary (`@openai/codex`, app-server over stdio) and the
 * fake Responses server on loopback. Real processes and real time, hence a live test. One Turn here takes
 * about one second (process start included).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option, Scope } from "effect"
import * as Net from "node:net"
import { PrepareFailed, type TurnEvent } from "../../src/runtime/harness/Harness.js"
import { makeCodexHarness } from "../../src/runtime/harness/codex/CodexHarness.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import {
  codexFixture,
  codexProcesses,
  filesContaining,
  keyVar,
  prepareRequest,
  providerConfig,
  recorder,
  secretKey,
  tempDir,
  text
} from "../support/fakeResponsesCodex.js"
import { fakeUsage } from "../support/fakeResponses.js"
import { withPreparationServices } from "../support/preparationServices.js"

/** A loopback port nobody listens on (bound, then released). */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer().listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const run = (id: string) => unsafeMake.runId(id)
const is = <T extends TurnEvent["type"]>(type: T) => (e: TurnEvent): e is Extract<TurnEvent, { type: T }> => e.type === type
const runUsage = {
  tokens: {
    input_tokens: fakeUsage.input,
    cached_input_tokens: fakeUsage.cached,
    output_tokens: fakeUsage.output,
    reasoning_output_tokens: fakeUsage.reasoning,
    total_tokens: fakeUsage.total
  },
  input_tokens: fakeUsage.input,
  output_tokens: fakeUsage.output
}

describe("CodexHarness (real binary)", () => {
  it.live("discovers the pinned binary and declares it available with its version", () =>
    Effect.gen(function* () {
      const { harness } = yield* codexFixture
      assert.strictEqual(harness.declaration.kind, "codex")
      assert.strictEqual(harness.declaration.available, true)
      assert.strictEqual(harness.declaration.version, "0.171.0")
      assert.isUndefined(harness.declaration.unavailableReason)
    }), 60_000)

  it.live("registers unavailable with a reason for a missing binary or a secret on the command line", () =>
    Effect.gen(function* () {
      const profile = yield* tempDir
      const missing = yield* makeCodexHarness({ path: `${profile}/no-codex`, config: [], env: {}, profileDir: profile })
      assert.strictEqual(missing.declaration.available, false)
      assert.match(missing.declaration.unavailableReason ?? "", /did not report a version/)
      const bearer = yield* makeCodexHarness({
        path: undefined,
        config: [`model_providers.x.experimental_bearer_token="sk-should-not-echo"`],
        env: { PATH: process.env["PATH"] ?? "" },
        profileDir: profile
      })
      assert.strictEqual(bearer.declaration.available, false)
      assert.match(bearer.declaration.unavailableReason ?? "", /use env_key/)
      assert.notInclude(bearer.declaration.unavailableReason ?? "", "sk-should-not-echo")
      // The record stays complete: discovery only clears availability.
      assert.deepStrictEqual(bearer.declaration.capabilities, missing.declaration.capabilities)
    }), 60_000)

  it.live("runs text Turns with reasoning, message items, rebased usage and the thread as native session", () =>
    Effect.gen(function* () {
      const { fake, harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness, { disable_subagents: true })))
      const first = recorder()
      const turn = yield* executor.startTurn(run("run-1"), text("hello REASON"), first.sink)
      const settled = yield* turn.awaitSettlement
      const thread = Option.getOrThrow(yield* executor.nativeSessionId)
      assert.deepStrictEqual(settled, {
        outcome: "completed",
        reusable: true,
        done: { content: "echo: hello REASON", usage: runUsage, metadata: { agent_session_id: thread, agent_session_type: "codex_thread" } }
      })
      assert.deepStrictEqual(first.events.filter((e) => e.type !== "tool_call"), [
        { type: "thinking", text: "thinking hard" },
        { type: "output_message", payload: { id: "msg_1", status: "in_progress" } },
        { type: "delta", delta: "echo: hel", item_id: "msg_1" },
        { type: "delta", delta: "lo REASON", item_id: "msg_1" },
        { type: "output_message", payload: { id: "msg_1", status: "completed", text: "echo: hello REASON" } },
        { type: "usage", payload: runUsage }
      ])
      // Execution controls and subagent control are enforced natively: neither tool reaches the model.
      const tools = fake.requests()[0]!.body.tools!.map((t) => t["name"] ?? t["type"])
      assert.include(tools, "exec_command")
      assert.notInclude(tools, "web_search")
      assert.notInclude(tools, "multi_agent_v1")
      // A second Turn on the same process: usage is rebased to that Run, not thread-cumulative.
      const second = recorder()
      const turn2 = yield* executor.startTurn(run("run-2"), text("again"), second.sink)
      const settled2 = yield* turn2.awaitSettlement
      assert.deepStrictEqual(settled2.done.usage, runUsage)
      assert.strictEqual(settled2.done.content, "echo: again")
      yield* executor.close
    }), 60_000)

  it.live("resumes the thread in a new process with its history, and refuses an unknown thread before input", () =>
    Effect.gen(function* () {
      const { fake, harness } = yield* codexFixture
      const a = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      yield* Effect.flatMap(a.startTurn(run("run-a"), text("remember PLUM"), recorder().sink), (t) => t.awaitSettlement)
      const thread = Option.getOrThrow(yield* a.nativeSessionId)
      yield* a.close
      const b = yield* withPreparationServices(harness.prepare(prepareRequest(harness, { agent_session_id: thread })))
      assert.deepStrictEqual(yield* b.nativeSessionId, Option.some(thread))
      const settled = yield* Effect.flatMap(b.startTurn(run("run-b"), text("what was it"), recorder().sink), (t) => t.awaitSettlement)
      assert.strictEqual(settled.done.metadata?.agent_session_id, thread)
      assert.deepStrictEqual(settled.done.usage, runUsage)
      const last = fake.requests().at(-1)!
      assert.include(JSON.stringify(last.body.input), "remember PLUM")
      yield* b.close
      const unknown = yield* Effect.exit(
        withPreparationServices(harness.prepare(prepareRequest(harness, { agent_session_id: "01a23224-0000-7000-8000-000000000000" })))
      )
      assert.deepStrictEqual(unknown, Exit.fail(new PrepareFailed({ reason: "codex has no history for that thread", code: "history_unavailable" })))
    }), 60_000)

  it.live("classifies engine errors from codexErrorInfo and always settles with done", () =>
    Effect.gen(function* () {
      const { harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const errorOf = (prompt: string, id: string) =>
        Effect.gen(function* () {
          const r = recorder()
          const settled = yield* Effect.flatMap(executor.startTurn(run(id), text(prompt), r.sink), (t) => t.awaitSettlement)
          assert.strictEqual(settled.outcome, "completed")
          return r.events.filter(is("error")).map((e) => ({ code: e.payload.code, http_status: e.payload.http_status }))
        })
      assert.deepStrictEqual(yield* errorOf("E429 please", "run-e1"), [{ code: "rate_limit_exceeded", http_status: undefined }])
      assert.deepStrictEqual(yield* errorOf("E500 please", "run-e2"), [{ code: "server_error", http_status: undefined }])
      assert.deepStrictEqual(yield* errorOf("ECTX please", "run-e3"), [{ code: "context_length_exceeded", http_status: undefined }])
      yield* executor.close
    }), 60_000)

  it.live("a model server that refuses connections ends the Turn at the reconnect deadline with connection_failed", () =>
    Effect.gen(function* () {
      const profile = yield* tempDir
      // A port nothing listens on: every connection is refused, and Codex keeps reconnecting on its own.
      const port = yield* Effect.promise(() => freePort())
      const harness = yield* makeCodexHarness({
        path: undefined,
        config: providerConfig({ baseUrl: `http://127.0.0.1:${port}/v1`, requests: () => [] }),
        env: { PATH: process.env["PATH"] ?? "", HOME: profile, [keyVar]: secretKey },
        profileDir: profile,
        reconnectBudget: Duration.seconds(3)
      })
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-down"), text("hello"), r.sink)
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.outcome, "completed")
      assert.isTrue(settled.reusable, "codex stopped the turn natively on our interrupt")
      assert.deepStrictEqual(r.events.filter(is("error")).map((e) => e.payload), [
        { error: "codex could not reach the model endpoint within 3s (it kept reconnecting)", code: "connection_failed" }
      ])
      yield* executor.close
    }), 60_000)

  it.live("leaves no process after close, and none after a preparation interrupted while the process starts", () =>
    Effect.gen(function* () {
      const { harness, profile } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      assert.isAbove(codexProcesses(profile).length, 0)
      yield* executor.close
      assert.deepStrictEqual(codexProcesses(profile), [])
      // The Runtime's contract: preparation runs in the Executor's own scope, closed when it is interrupted.
      const scope = yield* Scope.make()
      const fiber = yield* Effect.forkChild(withPreparationServices(harness.prepare(prepareRequest(harness))).pipe(Scope.provide(scope)))
      while (codexProcesses(profile).length === 0) yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(fiber)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(codexProcesses(profile), [])
    }), 60_000)

  it.live("keeps the provider key out of the profile files and out of the commands Codex runs", () =>
    Effect.gen(function* () {
      const { fake, harness, profile } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-k"), text(`SHELL:echo key=$${keyVar} cred=$AGENTWIRE_CREDENTIAL`), r.sink)
      const asked = yield* r.waitFor(is("permission_request"))
      // While Codex runs (shell snapshots exist now), no file under the profile holds the key.
      assert.deepStrictEqual(filesContaining(profile, secretKey), [])
      assert.strictEqual(asked.payload.tool, "command")
      yield* turn.decidePermission(asked.payload.request_id, { approved: true })
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.done.content, "tool done")
      const after = r.events.filter(is("tool_call")).find((e) => e.payload.stage === "after")!
      assert.deepStrictEqual(after.payload.observation?.output, "key= cred=\n")
      assert.strictEqual(after.payload.observation?.exit_code, 0)
      assert.strictEqual(after.payload.observation?.status, "completed")
      assert.strictEqual(fake.requests()[0]!.authorization, `Bearer ${secretKey}`)
      assert.deepStrictEqual(filesContaining(profile, secretKey), [])
      yield* executor.close
      assert.deepStrictEqual(filesContaining(profile, secretKey), [])
    }), 60_000)
})
