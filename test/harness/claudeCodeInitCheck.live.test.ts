/**
 * Every native turn re-checks `system/init` (docs/harness-claude-code.md "Discovery"): a binary whose init lacks a
 * receipt signal the adapter relies on (`msg_lifecycle_v1`, `interrupt_receipt_v1`, `interrupt_cancel_queued_v1`),
 * or still offers a tool the execution controls removed, leaves the Turn's settlement unconfirmed and the
 * Executor unusable — never a guessed receipt. The pinned 2.1.332 passes this check in every real-binary test;
 * the failing side needs a binary that misbehaves, so this test isolates the check with a minimal stream-json
 * speaker (a real child process, stdin/stdout, answering `initialize`; per user line one `system/init`, a `result`
 * and `command_lifecycle completed`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { prepareExecutor } from "../../src/runtime/harness/claude_code/ClaudeCodeExecutor.js"
import { claudeCodeCapabilities } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import { settingsFromEnv } from "../../src/runtime/harness/claude_code/ClaudeCodeSettings.js"
import { start } from "./HarnessLifecycleSuite.js"
import { withPreparationServices } from "../support/preparationServices.js"

const speaker = (init: { readonly capabilities: ReadonlyArray<string>; readonly tools: ReadonlyArray<string> }) => `#!${process.execPath}
const rl = require("node:readline").createInterface({ input: process.stdin })
const out = (m) => process.stdout.write(JSON.stringify(m) + "\\n")
rl.on("line", (line) => {
  const m = JSON.parse(line)
  if (m.type === "control_request" && m.request.subtype === "initialize") {
    out({ type: "control_response", response: { subtype: "success", request_id: m.request_id, response: {} } })
  } else if (m.type === "user") {
    out({ type: "system", subtype: "init", session_id: "0a0b0c0d-0000-4000-8000-000000000001",
      capabilities: ${JSON.stringify(init.capabilities)}, tools: ${JSON.stringify(init.tools)}, user_message_uuids: [m.uuid] })
    out({ type: "result", subtype: "success", is_error: false, session_id: "0a0b0c0d-0000-4000-8000-000000000001", user_message_uuids: [m.uuid] })
    out({ type: "command_lifecycle", command_uuid: m.uuid, state: "completed" })
  }
})
`

const all = ["msg_lifecycle_v1", "interrupt_receipt_v1", "interrupt_cancel_queued_v1"]
const base: PromptRequestPayload = { agent_kind: "claude_code", conversation_id: "", run_id: "" }

const turnAgainst = (init: { readonly capabilities: ReadonlyArray<string>; readonly tools: ReadonlyArray<string> }, config: Partial<PromptRequestPayload>) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-cc-init-"))),
      (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
    )
    const binary = Path.join(dir, "claude")
    Fs.writeFileSync(binary, speaker(init), { mode: 0o700 })
    const settings = settingsFromEnv({ PATH: process.env.PATH }, { profileDir: dir, binaryPath: Option.some(binary) })
    const executor = yield* Effect.orDie(withPreparationServices(prepareExecutor(settings, binary, {
      executorId: unsafeMake.executorId("exec-init-check"),
      sessionId: unsafeMake.sessionId("0a0b0c0d-0000-4000-8000-00000000000f"),
      configuration: { ...base, ...config },
      declaration: { kind: "claude_code", available: true, version: "2.1.332", capabilities: claudeCodeCapabilities }
    })))
    const started = yield* start(executor, [{ content: [{ type: "input_text", text: "hello" }] }])
    const settlement = yield* Effect.exit(started.turn.awaitSettlement)
    const next = yield* Effect.exit(executor.startTurn(unsafeMake.runId("run-after"), [{ content: [{ type: "input_text", text: "again" }] }], { emit: () => Effect.void }))
    return { settlement, next }
  })

const failureText = (exit: Exit.Exit<unknown, unknown>) => (Exit.isFailure(exit) ? JSON.stringify(exit.cause) : "success")

describe("ClaudeCode system/init check", () => {
  it.live("an init without the receipt signals leaves the settlement unconfirmed and the Executor unusable", () =>
    Effect.gen(function* () {
      const { settlement, next } = yield* turnAgainst({ capabilities: ["msg_lifecycle_v1"], tools: ["Bash"] }, {})
      assert.isTrue(Exit.isFailure(settlement))
      assert.include(failureText(settlement), "SettlementUnconfirmed")
      assert.include(failureText(settlement), "lacks interrupt_receipt_v1, interrupt_cancel_queued_v1")
      assert.isTrue(Exit.isFailure(next))
      assert.include(failureText(next), "executor unusable")
    }), 30_000)

  it.live("an init that still offers a tool the execution controls removed is refused the same way", () =>
    Effect.gen(function* () {
      const { settlement, next } = yield* turnAgainst(
        { capabilities: all, tools: ["Bash", "WebSearch"] },
        { execution_controls: { web_search: "disabled", text_verbosity: "medium" } }
      )
      assert.include(failureText(settlement), "disallowed tools still offered: WebSearch")
      assert.include(failureText(next), "executor unusable")
    }), 30_000)

  it.live("an init with every signal and no removed tool is accepted (the check is not a blanket refusal)", () =>
    Effect.gen(function* () {
      const { settlement, next } = yield* turnAgainst(
        { capabilities: all, tools: ["Bash"] },
        { execution_controls: { web_search: "disabled", text_verbosity: "medium" } }
      )
      assert.isTrue(Exit.isSuccess(settlement), failureText(settlement))
      if (Exit.isSuccess(settlement)) assert.strictEqual(settlement.value.outcome, "completed")
      assert.isTrue(Exit.isSuccess(next), failureText(next))
    }), 30_000)
})
