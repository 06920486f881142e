/**
 * Claude Code interactions and Executor ownership against the real binary and the fake Messages server (issue
 * #15), beyond the shared lifecycle suite: a permission allowed with an updated input runs the updated tool
 * input; a denial's message reaches the model; a cancel while a permission is pending withdraws it natively
 * (`control_cancel_request` → `permission_cancel`); AskUserQuestion gets the stable id `q0` and the chosen label
 * reaches the model; the Turn's model comes from the Session configuration, else `ANTHROPIC_MODEL`; a bearer
 * token is sent as such; each Executor owns a 0700 scratch directory (its working directory, removed on close)
 * and a per-Session `CLAUDE_CONFIG_DIR` under the daemon profile (kept); a preparation whose handshake outlives
 * its deadline fails and its Scope's close leaves no process and no directory.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Option, Redacted, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { ClaudeCodeExecutor } from "../../src/runtime/harness/claude_code/ClaudeCodeExecutor.js"
import type { ClaudeCodeHarness } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import type { PrepareFailed, TurnEvent } from "../../src/runtime/harness/Harness.js"
import { baseRequest as base, claudeCodeAgainstFake, say, spawnedClaudePids } from "../support/claudeCodeFixture.js"
import type { FakeAnthropic } from "../support/fakeAnthropic.js"
import { nextMatching, start } from "./HarnessLifecycleSuite.js"
import { isRunning } from "../support/processAlive.js"
import { withPreparationServices } from "../support/preparationServices.js"

let executors = 0
const prepareIn = (harness: ClaudeCodeHarness, sessionId: string, overrides: Partial<PromptRequestPayload> = {}) =>
  withPreparationServices(harness.prepare({
    executorId: unsafeMake.executorId(`exec-int-${++executors}`),
    sessionId: unsafeMake.sessionId(sessionId),
    configuration: { ...base, ...overrides },
    declaration: harness.declaration
  })) as Effect.Effect<ClaudeCodeExecutor, PrepareFailed, Scope.Scope>
const prepare = (harness: ClaudeCodeHarness, sessionId: string, overrides: Partial<PromptRequestPayload> = {}) =>
  Effect.orDie(prepareIn(harness, sessionId, overrides))
const settle = (s: { readonly turn: { readonly awaitSettlement: Effect.Effect<unknown, unknown> } }) =>
  Effect.orDie(s.turn.awaitSettlement) as Effect.Effect<{ readonly outcome: string; readonly done: { readonly content: string } }>
const ofType = <T extends TurnEvent["type"]>(seen: ReadonlyArray<TurnEvent>, type: T) =>
  seen.filter((e): e is Extract<TurnEvent, { type: T }> => e.type === type)

interface Block {
  readonly type: string
  readonly tool_use_id?: string
  readonly is_error?: boolean
  readonly content?: unknown
}
interface Body {
  readonly model?: string
  readonly stream?: boolean
  readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: string | ReadonlyArray<Block> }>
}
const bodies = (fake: FakeAnthropic) =>
  fake.requests.filter((r) => r.path === "/v1/messages" && (r.body as Body | undefined)?.stream === true).map((r) => r.body as Body)
/** The tool_result block of `toolUseId` in the last model request. */
const lastToolResult = (fake: FakeAnthropic, toolUseId: string): Block | undefined =>
  (bodies(fake).at(-1)?.messages ?? []).flatMap((m) => (typeof m.content === "string" ? [] : m.content))
    .find((b) => b.type === "tool_result" && b.tool_use_id === toolUseId)
const textOf = (block: Block | undefined) => JSON.stringify(block?.content ?? null)

describe("ClaudeCode interactions and ownership (real binary)", () => {
  it.live("a permission allowed with an updated input runs the updated input; a denial's message reaches the model", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      const executor = yield* prepare(harness, "20000000-0000-4000-8000-000000000001")

      const allowed = yield* start(executor, say("TOOL please"))
      const request = yield* nextMatching(allowed, "permission_request")
      const original = (request.payload.payload as { readonly input: { readonly command: string } }).input
      assert.strictEqual(original.command, "touch fake-tool-file && chmod 600 fake-tool-file && echo ok")
      yield* Effect.orDie(allowed.turn.decidePermission(request.payload.request_id, {
        approved: true,
        updatedInput: { command: "echo updated-by-core", description: "edited by Core" }
      }))
      yield* settle(allowed)
      const after = ofType(allowed.seen, "tool_call").map((e) => e.payload).filter((c) => c.stage === "after")
      assert.strictEqual(after.length, 1)
      assert.strictEqual(after[0]!.observation?.output, "updated-by-core", "the tool ran the updated input")
      assert.include(textOf(lastToolResult(fake, after[0]!.id)), "updated-by-core")

      const denied = yield* start(executor, say("TOOL again"))
      const second = yield* nextMatching(denied, "permission_request")
      yield* Effect.orDie(denied.turn.decidePermission(second.payload.request_id, { approved: false, message: "not now, says Core" }))
      const settled = yield* settle(denied)
      assert.strictEqual(settled.outcome, "completed")
      const deniedAfter = ofType(denied.seen, "tool_call").map((e) => e.payload).filter((c) => c.stage === "after")
      assert.strictEqual(deniedAfter.length, 1)
      assert.strictEqual(deniedAfter[0]!.observation?.status, "failed")
      const result = lastToolResult(fake, deniedAfter[0]!.id)
      assert.isTrue(result?.is_error)
      assert.include(textOf(result), "not now, says Core")
    }), 180_000)

  it.live("cancelling while a permission is pending withdraws it (permission_cancel) and settles as cancelled", () =>
    Effect.gen(function* () {
      const { harness } = yield* claudeCodeAgainstFake()
      const executor = yield* prepare(harness, "20000000-0000-4000-8000-000000000002")
      const turn = yield* start(executor, say("TOOL please"))
      const request = yield* nextMatching(turn, "permission_request")
      yield* Effect.orDie(turn.turn.cancel)
      const withdrawn = yield* nextMatching(turn, "permission_cancel")
      assert.strictEqual(withdrawn.interactionId, request.payload.request_id)
      const settled = yield* settle(turn)
      assert.strictEqual(settled.outcome, "cancelled")
      const late = yield* Effect.exit(turn.turn.decidePermission(request.payload.request_id, { approved: true }))
      assert.isTrue(Exit.isFailure(late), "a withdrawn request is no longer pending")
      // The Executor stays usable after the withdrawal.
      assert.strictEqual((yield* settle(yield* start(executor, say("hello")))).outcome, "completed")
    }), 180_000)

  it.live("AskUserQuestion: stable question id q0, the chosen label reaches the model; a cancelled choice is a denial", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      const executor = yield* prepare(harness, "20000000-0000-4000-8000-000000000003")
      const asked = yield* start(executor, say("ASK please"))
      const ask = yield* nextMatching(asked, "prompt_for_user_choice")
      assert.deepStrictEqual(ask.payload.questions.map((q) => [q.id, q.question, q.options.map((o) => o.label)]), [
        ["q0", "Which color?", ["Blue", "Red"]]
      ])
      assert.isString(ask.payload.tool_use_id)
      yield* Effect.orDie(asked.turn.answerUserChoice(ask.payload.ask_id, {
        cancelled: false,
        questionAnswers: [{ question_id: "q0", answers: ["Red"] }]
      }))
      assert.strictEqual((yield* settle(asked)).outcome, "completed")
      const answered = lastToolResult(fake, ask.payload.tool_use_id!)
      assert.notStrictEqual(answered?.is_error, true)
      assert.include(textOf(answered), String.raw`\"Which color?\"=\"Red\"`)

      const again = yield* start(executor, say("ASK again"))
      const second = yield* nextMatching(again, "prompt_for_user_choice")
      assert.strictEqual(second.payload.questions[0]!.id, "q0")
      yield* Effect.orDie(again.turn.answerUserChoice(second.payload.ask_id, { cancelled: true, questionAnswers: [] }))
      assert.strictEqual((yield* settle(again)).outcome, "completed")
      const declined = lastToolResult(fake, second.payload.tool_use_id!)
      assert.isTrue(declined?.is_error)
      assert.include(textOf(declined), "declined to answer")
    }), 180_000)

  it.live("the Turn's model is the Session's agent_options.model, else ANTHROPIC_MODEL; a bearer token is sent as Bearer", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake({
        settings: {
          apiKey: Option.none(),
          authToken: Option.some(Redacted.make("tok-fake-bearer")),
          model: Option.some("env-model")
        }
      })
      assert.isTrue(harness.declaration.available)
      const fromEnv = yield* prepare(harness, "20000000-0000-4000-8000-000000000004", { agent_options: {} })
      yield* settle(yield* start(fromEnv, say("which model one")))
      const fromConfig = yield* prepare(harness, "20000000-0000-4000-8000-000000000005", { agent_options: { model: "config-model" } })
      yield* settle(yield* start(fromConfig, say("which model two")))
      const modelOf = (word: string) =>
        bodies(fake).filter((b) => JSON.stringify(b.messages).includes(word)).map((b) => b.model)
      assert.deepStrictEqual(modelOf("which model one"), ["env-model"])
      assert.deepStrictEqual(modelOf("which model two"), ["config-model"])
      const messages = fake.requests.filter((r) => r.path === "/v1/messages")
      assert.isAbove(messages.length, 0)
      assert.isTrue(messages.every((r) => r.auth === "bearer"))
    }), 180_000)

  it.live("an Executor runs in its own 0700 scratch directory (removed on close) with the Session's CLAUDE_CONFIG_DIR under the profile (kept)", () =>
    Effect.gen(function* () {
      const { harness, profileDir } = yield* claudeCodeAgainstFake()
      const session = "20000000-0000-4000-8000-000000000006"
      const executor = yield* prepare(harness, session)
      const settled = yield* Effect.orDie(
        (yield* start(executor, say("hello dirs"))).turn.awaitSettlement
      )
      const scratch = Fs.readlinkSync(`/proc/${executor.pid}/cwd`)
      assert.strictEqual(Path.dirname(scratch), Path.join(profileDir, "claude-code", "scratch"))
      assert.strictEqual(Fs.statSync(scratch).mode & 0o777, 0o700)
      const environ = Fs.readFileSync(`/proc/${executor.pid}/environ`, "utf8").split("\0")
      const configDir = Path.join(profileDir, "claude-code", "sessions", `session-${session}`, "config")
      assert.include(environ, `CLAUDE_CONFIG_DIR=${configDir}`)
      assert.strictEqual(Fs.statSync(configDir).mode & 0o777, 0o700)
      const nativeId = settled.done.metadata?.agent_session_id
      assert.isString(nativeId)
      yield* Effect.orDie(executor.close)
      assert.isFalse(isRunning(executor.pid))
      assert.isFalse(Fs.existsSync(scratch), "the scratch directory is removed on confirmed close")
      const stored = Fs.readdirSync(Path.join(configDir, "projects"), { recursive: true }).map(String)
      assert.isTrue(stored.some((f) => f.endsWith(`${nativeId}.jsonl`)), "the Session's native history is kept")
    }), 120_000)

  it.live("a preparation whose handshake outlives its deadline fails; closing its Scope leaves no process and no directory", () =>
    Effect.gen(function* () {
      const { harness, profileDir } = yield* claudeCodeAgainstFake({ settings: { prepareTimeout: Duration.millis(1) } })
      const before = spawnedClaudePids.length
      const scope = yield* Scope.make()
      const exit = yield* Effect.exit(prepareIn(harness, "20000000-0000-4000-8000-000000000007").pipe(Scope.provide(scope)))
      assert.isTrue(Exit.isFailure(exit))
      const failure = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
      assert.include(Option.getOrThrow(failure).reason, "did not answer initialize in time")
      const spawned = spawnedClaudePids.slice(before)
      assert.strictEqual(spawned.length, 1, "the process was started before the deadline")
      const scratchRoot = Path.join(profileDir, "claude-code", "scratch")
      assert.strictEqual(Fs.readdirSync(scratchRoot).length, 1, "ownership is kept until the Scope closes")
      assert.isTrue(isRunning(spawned[0]!), "the process is still owned (not abandoned) until the Scope closes")
      yield* Scope.close(scope, exit)
      assert.isFalse(isRunning(spawned[0]!), "the process is gone after the Scope's close")
      assert.deepStrictEqual(Fs.readdirSync(scratchRoot), [])
    }), 60_000)
})
