/**
 * Claude Code capabilities beyond the shared lifecycle suite, each proved against the real binary and the fake
 * Messages server: streaming thinking and message items, tool observations, execution controls applied
 * natively (the model is not offered the removed tools), resume history, native session recovery, the steered
 * text reaching the model, classified engine errors, and the key never reaching argv or an error frame.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as fs from "node:fs/promises"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { ClaudeCodeExecutor } from "../../src/runtime/harness/claude_code/ClaudeCodeExecutor.js"
import type { ClaudeCodeHarness } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import type { TurnEvent } from "../../src/runtime/harness/Harness.js"
import { nextMatching, start } from "./HarnessLifecycleSuite.js"
import { baseRequest as base, claudeCodeAgainstFake, say } from "../support/claudeCodeFixture.js"
import { withPreparationServices } from "../support/preparationServices.js"

let executors = 0
const prepare = (harness: ClaudeCodeHarness, sessionId: string, overrides: Partial<PromptRequestPayload> = {}) =>
  Effect.orDie(withPreparationServices(harness.prepare({
    executorId: unsafeMake.executorId(`exec-cap-${++executors}`),
    sessionId: unsafeMake.sessionId(sessionId),
    configuration: { ...base, ...overrides },
    declaration: harness.declaration
  })))
const settle = (s: { readonly turn: { readonly awaitSettlement: Effect.Effect<unknown, unknown> } }) =>
  Effect.orDie(s.turn.awaitSettlement) as Effect.Effect<{ readonly outcome: string; readonly done: { readonly content: string; readonly metadata?: { readonly agent_session_id?: string } } }>
const ofType = <T extends TurnEvent["type"]>(seen: ReadonlyArray<TurnEvent>, type: T) =>
  seen.filter((e): e is Extract<TurnEvent, { type: T }> => e.type === type)

/** A 1×1 PNG. */
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

interface FakeBody {
  readonly tools?: ReadonlyArray<{ readonly name?: string }>
  readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
}

describe("ClaudeCode (real binary)", () => {
  it.live("streams thinking and message items, and observes a permitted Bash tool call from before to after", () =>
    Effect.gen(function* () {
      const { harness } = yield* claudeCodeAgainstFake()
      const executor = yield* prepare(harness, "10000000-0000-4000-8000-000000000001", { observe_messages: true })
      const thinking = yield* start(executor, say("THINK about it"))
      yield* settle(thinking)
      assert.deepStrictEqual(ofType(thinking.seen, "thinking").map((e) => e.text), ["pondering the question"])
      const messages = ofType(thinking.seen, "output_message").map((e) => e.payload)
      assert.strictEqual(messages.length, 2)
      assert.strictEqual(messages[0]!.status, "in_progress")
      assert.deepStrictEqual(messages[1], { id: messages[0]!.id, status: "completed", text: "echo: THINK about it" })
      assert.isTrue(ofType(thinking.seen, "delta").every((d) => d.item_id === messages[0]!.id))

      const tool = yield* start(executor, say("TOOL please"))
      const request = yield* nextMatching(tool, "permission_request")
      assert.strictEqual(request.payload.tool, "Bash")
      yield* Effect.orDie(tool.turn.decidePermission(request.payload.request_id, { approved: true }))
      yield* settle(tool)
      const calls = ofType(tool.seen, "tool_call").map((e) => e.payload)
      assert.strictEqual(calls.length, 2)
      assert.strictEqual(calls[0]!.stage, "before")
      assert.deepStrictEqual(calls[0]!.observation, {
        kind: "command",
        status: "in_progress",
        name: "Bash",
        command: "touch fake-tool-file && chmod 600 fake-tool-file && echo ok"
      })
      assert.strictEqual(calls[1]!.stage, "after")
      assert.strictEqual(calls[1]!.id, calls[0]!.id)
      assert.strictEqual(calls[1]!.observation?.status, "completed")
      assert.strictEqual(calls[1]!.observation?.output, "ok")
    }), 180_000)

  it.live("applies execution controls natively: web search and sub-agent tools are not offered to the model", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      const plain = yield* prepare(harness, "10000000-0000-4000-8000-000000000002")
      yield* settle(yield* start(plain, say("hello")))
      const controlled = yield* prepare(harness, "10000000-0000-4000-8000-000000000003", {
        execution_controls: { web_search: "disabled", text_verbosity: "medium" },
        disable_subagents: true
      })
      yield* settle(yield* start(controlled, say("hello")))
      const bodies = fake.requests.filter((r) => r.path === "/v1/messages").map((r) => r.body as FakeBody)
      assert.strictEqual(bodies.length, 2)
      const toolSets = bodies.map((b) => (b.tools ?? []).map((t) => t.name ?? ""))
      // By default the sub-agent tools are offered and WebSearch is named (as a deferred tool).
      assert.includeMembers(toolSets[0]!, ["Agent", "Workflow"])
      assert.include(JSON.stringify(bodies[0]), "WebSearch")
      // With the controls, none of them reaches the model in any form.
      for (const name of ["Agent", "Workflow", "Task"]) assert.notInclude(toolSets[1]!, name)
      assert.notInclude(JSON.stringify(bodies[1]), "WebSearch")
      assert.include(toolSets[1]!, "Bash")
    }), 180_000)

  it.live("resumes with the stored history, recovers the Session's native session, and delivers steered text", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake({ slowDeltas: 8 })
      const session = "10000000-0000-4000-8000-000000000004"
      const first = yield* prepare(harness, session)
      const slow = yield* start(first, say("SLOW first"))
      yield* nextMatching(slow, "delta")
      yield* Effect.orDie(slow.turn.steerWithReceipt(
        { inputId: unsafeMake.inputId("input-1"), input: say("steered remark"), durable: true },
        Effect.void
      ))
      const before = yield* settle(slow)
      assert.isTrue(fake.prompts().some((p) => p.includes("steered remark")), "the steered text reached the model")
      const nativeId = before.done.metadata?.agent_session_id
      yield* Effect.orDie(first.close)

      const recovered = yield* prepare(harness, session, { require_existing_native_session: true })
      assert.deepStrictEqual(yield* recovered.nativeSessionId, Option.some(nativeId!))
      yield* settle(yield* start(recovered, say("remember me")))
      const last = fake.requests.filter((r) => r.path === "/v1/messages").at(-1)!.body as FakeBody
      const history = JSON.stringify(last.messages)
      assert.include(history, "SLOW first")
      assert.include(history, "remember me")
    }), 180_000)

  it.live("classifies engine errors from structured fields and keeps the key out of argv and error frames", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      const executor = yield* prepare(harness, "10000000-0000-4000-8000-000000000005") as Effect.Effect<ClaudeCodeExecutor>
      const cmdline = yield* Effect.promise(() => fs.readFile(`/proc/${executor.pid}/cmdline`, "utf8"))
      assert.notInclude(cmdline, "sk-ant-fake-test-key")
      const codes: Array<string | undefined> = []
      for (const keyword of ["E529", "E500", "E401", "E400"]) {
        const turn = yield* start(executor, say(`${keyword} now`))
        yield* settle(turn)
        const errors = ofType(turn.seen, "error").map((e) => e.payload)
        assert.strictEqual(errors.length, 1)
        assert.notInclude(errors[0]!.error, fake.url.replace("http://", ""))
        assert.notInclude(errors[0]!.error, "sk-ant")
        codes.push(errors[0]!.code)
      }
      assert.deepStrictEqual(codes, ["server_overloaded", "server_error", "authentication_error", "invalid_request"])
    }), 180_000)

  it.live("translates image input natively: the model request carries the image block with its bytes", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      assert.isTrue(harness.declaration.capabilities.message_images)
      const executor = yield* prepare(harness, "10000000-0000-4000-8000-000000000006")
      const turn = yield* start(executor, [{ content: [{ type: "input_text", text: "what is in this picture" }, { type: "input_image", image_url: `data:image/png;base64,${pixel}` }] }])
      const settled = yield* settle(turn)
      assert.strictEqual(settled.outcome, "completed")
      assert.match(settled.done.content, /^echo: what is in this picture/)
      const body = fake.requests.filter((r) => r.path === "/v1/messages").at(-1)!.body as FakeBody
      const user = body.messages!.filter((m) => m.role === "user").at(-1)!
      const images = (user.content as ReadonlyArray<{ readonly type: string; readonly source?: unknown }>).filter((b) => b.type === "image")
      assert.deepStrictEqual(images.map((b) => b.source), [{ type: "base64", media_type: "image/png", data: pixel }])
    }), 120_000)

  it.live("hosts Core's function tools natively: offered as mcp__functions__*, called without a permission prompt, answered by call id", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      assert.isTrue(harness.declaration.capabilities.function_tools)
      const executor = yield* prepare(harness, "10000000-0000-4000-8000-000000000007", {
        function_tools: [{ name: "lookup", description: "Looks a value up", parameters: { type: "object", properties: { key: { type: "string" } } } }]
      })
      const turn = yield* start(executor, say("FUNC please"))
      const call = yield* nextMatching(turn, "function_call")
      assert.deepStrictEqual(call.payload.arguments, { key: "k" })
      assert.match(call.payload.call_id, /^toolu_fake_/, "the native tool_use id is the call id")
      yield* Effect.orDie(turn.turn.submitFunctionResult({ callId: call.payload.call_id, success: true, content: [{ type: "input_text", text: "forty-two" }] }))
      const settled = yield* settle(turn)
      assert.strictEqual(settled.outcome, "completed")
      assert.deepStrictEqual(ofType(turn.seen, "permission_request"), [])
      const observed = ofType(turn.seen, "tool_call").map((e) => [e.payload.id, e.payload.stage, e.payload.observation?.kind, e.payload.observation?.name])
      assert.deepStrictEqual(observed, [[call.payload.call_id, "before", "function", "lookup"], [call.payload.call_id, "after", "function", "lookup"]])
      const bodies = fake.requests.filter((r) => r.path === "/v1/messages").map((r) => r.body as FakeBody)
      assert.isTrue(bodies[0]!.tools!.some((t) => t.name === "mcp__functions__lookup"))
      assert.include(JSON.stringify(bodies.at(-1)), "forty-two")
      // A second result for the same call is not pending any more.
      const again = yield* Effect.exit(turn.turn.submitFunctionResult({ callId: call.payload.call_id, success: true, content: [] }))
      assert.isTrue(again._tag === "Failure")
    }), 120_000)
})
