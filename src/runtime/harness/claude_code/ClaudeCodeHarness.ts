/**
 * The `claude_code` Harness kind (issue #15; docs/harness-claude-code.md): Claude Code driven through its
 * stream-json CLI mode. The declaration is the static maximum of what a test proved against the real binary
 * (test/harness/claudeCode.lifecycle.live.test.ts and claudeCode.capabilities.live.test.ts); every other field
 * is `false` and refused before any native call. Discovery at daemon start can only make the kind unavailable
 * (with `unavailableReason`), keeping the complete record.
 */
import { Effect, Scope } from "effect"
import type { AgentKindCapabilities } from "../../../proto/Capabilities.js"
import type { HarnessDeclaration, PrepareFailed, PrepareRequest } from "../Harness.js"
import { PrepareFailed as PrepareFailedError } from "../Harness.js"
import type { Ownership } from "../../Ownership.js"
import type { RuntimePolicy } from "../../RuntimePolicy.js"
import { type ClaudeCodeExecutor, prepareExecutor } from "./ClaudeCodeExecutor.js"
import { ClaudeCodeKind, type ClaudeCodeSettings, type Discovery, discover } from "./ClaudeCodeSettings.js"

/**
 * One explicit decision per field. `true` only where a real-binary test proves it; see the capability table in
 * docs/harness-claude-code.md for the native basis of each.
 */
export const claudeCodeCapabilities: AgentKindCapabilities = {
  streaming: true,
  steering: true,
  durable_input_receipts: true,
  durable_turns: true,
  preparation: true,
  execution_controls: true,
  tool_observations: true,
  message_items: true,
  environment_none: true,
  usage: true,
  resume: true,
  native_session_recovery: true,
  permissions: true,
  subagent_control: true,
  message_images: true,
  function_tools: true,
  // Not (yet) proven against the real binary, or not offered by this adapter: refused before any native call.
  subagent_observations: false,
  local_environment: false,
  workspace_read_preparation: false,
  workspace_output_export: false,
  workspace_authoring: false,
  programmatic_tool_calling_disable: false,
  web_search_control: false,
  text_verbosity: false,
  structured_output: false,
  tool_search: false,
  function_result_images: false,
  mcp_http_tools: false,
  mcp_http_required: false,
  mcp_http_bearer_auth: false
}

/** The adapter contract with scoped preparation (the Runtime runs it in the Executor's child Scope). */
export interface ClaudeCodeHarness {
  readonly declaration: HarnessDeclaration
  readonly prepare: (
    request: PrepareRequest
  ) => Effect.Effect<ClaudeCodeExecutor, PrepareFailed, Scope.Scope | Ownership | RuntimePolicy>
}

/** The kind's constructor: discovery once (at daemon start), then preparations. */
export const makeClaudeCodeHarness = (
  settings: ClaudeCodeSettings | undefined
): Effect.Effect<ClaudeCodeHarness, never, Scope.Scope> =>
  Effect.gen(function* () {
    const found: Discovery = settings === undefined
      ? { _tag: "Unavailable", reason: "claude_code is not configured in this daemon" }
      : yield* discover(settings)
    const declaration: HarnessDeclaration = found._tag === "Available"
      ? { kind: ClaudeCodeKind, available: true, version: found.version, capabilities: claudeCodeCapabilities }
      : {
        kind: ClaudeCodeKind,
        available: false,
        ...(found.version === undefined ? {} : { version: found.version }),
        unavailableReason: found.reason,
        capabilities: claudeCodeCapabilities
      }
    if (found._tag === "Unavailable") {
      yield* Effect.logWarning("claude_code harness unavailable").pipe(Effect.annotateLogs({ reason: found.reason }))
    }
    const prepare = (request: PrepareRequest) =>
      found._tag === "Available" && settings !== undefined
        ? prepareExecutor(settings, found.binary, request)
        : Effect.fail(new PrepareFailedError({ reason: "claude_code is unavailable" }))
    return { declaration, prepare }
  })
