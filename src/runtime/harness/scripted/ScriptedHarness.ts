/**
 * The built-in `scripted` harness: a deterministic controlled adapter with no processes, used by the demo,
 * the tests and external conformance checks (README section "scripted-harness"). Its declaration describes
 * the composed daemon + harness (`scriptedCapabilities`): 26 capabilities supported; the four this daemon
 * cannot honour are unsupported (workspace reads and exports, authoring, a local Environment binding). A
 * daemon can narrow it further with `RuntimeProcessOptions.scripted.disabledCapabilities`. A Turn's input text
 * is plain text (echoed back as deltas, then done) or `{"script": [steps]}` (Script.ts). Native settlement is
 * controlled by the script and by `ScriptedSignals`; time only passes on the Effect clock.
 *
 * It proves the transport and dispatcher contract, never native Harness behaviour.
 */
import { Effect, Exit, Option, Scope } from "effect"
import { type AgentKindCapabilities, type CapabilityName, capabilityNames } from "../../../proto/Capabilities.js"
import type { MessageInput } from "../../../proto/MessageInput.js"
import type { RunId } from "../../../proto/Ids.js"
import {
  CloseFailed,
  type Executor,
  type Harness,
  type HarnessDeclaration,
  PrepareFailed,
  type PrepareRequest,
  StartFailed,
  type TurnSink
} from "../Harness.js"
import { decodePrepareOptions, toDuration } from "./Script.js"
import { initializeRequired } from "../McpBindings.js"
import { ScriptedSignals } from "./ScriptedSignals.js"
import { makeTurn } from "./ScriptedTurn.js"
import type { ScriptedOperation } from "./ScriptedTurnState.js"

export const ScriptedKind = "scripted"
export const ScriptedVersion = "1.0.0"

export type { ScriptedOperation } from "./ScriptedTurnState.js"

export interface ScriptedOptions {
  readonly disabledCapabilities?: ReadonlyArray<CapabilityName> | undefined
  readonly available?: boolean | undefined
  readonly contractViolations?: ReadonlyArray<ScriptedOperation> | undefined
  /**
   * The bound workspace root (EnvironmentBinding): its presence declares `local_environment`,
   * `workspace_read_preparation` and `workspace_output_export` (the daemon's own workspace implementation serves
   * them), and the Turns run with it as their working directory (`write_file` / `read_file` steps).
   */
  readonly workspaceRoot?: string | undefined
}

/**
 * What the daemon composed with the scripted harness can do, one explicit decision per field (a new field fails
 * to compile here until it is decided). Unsupported, because this daemon refuses the matching operations for
 * certain: `workspace_authoring` (no authoring command); and, without an Environment binding,
 * `local_environment`, `workspace_read_preparation` and `workspace_output_export` (nothing to bind or read).
 * With a binding (`ScriptedOptions.workspaceRoot`) `scriptedDeclaration` declares those three true.
 */
export const scriptedCapabilities: AgentKindCapabilities = {
  subagent_observations: true,
  streaming: true,
  permissions: true,
  usage: true,
  resume: true,
  native_session_recovery: true,
  workspace_authoring: false,
  steering: true,
  message_items: true,
  tool_observations: true,
  environment_none: true,
  local_environment: false,
  preparation: true,
  workspace_read_preparation: false,
  workspace_output_export: false,
  programmatic_tool_calling_disable: true,
  web_search_control: true,
  execution_controls: true,
  text_verbosity: true,
  structured_output: true,
  tool_search: true,
  message_images: true,
  function_result_images: true,
  subagent_control: true,
  durable_input_receipts: true,
  durable_turns: true,
  function_tools: true,
  mcp_http_tools: true,
  mcp_http_required: true,
  mcp_http_bearer_auth: true
}

/** The declaration: `scriptedCapabilities`, with the disabled ones also unsupported (narrowing only). */
export const scriptedDeclaration = (options: ScriptedOptions = {}): HarnessDeclaration => {
  const disabled = new Set(options.disabledCapabilities ?? [])
  const bound = options.workspaceRoot !== undefined
  const base: AgentKindCapabilities = bound
    ? { ...scriptedCapabilities, local_environment: true, workspace_read_preparation: true, workspace_output_export: true }
    : scriptedCapabilities
  const capabilities = Object.fromEntries(
    capabilityNames.map((name) => [name, base[name] && !disabled.has(name)])
  ) as AgentKindCapabilities
  return { kind: ScriptedKind, available: options.available ?? true, version: ScriptedVersion, capabilities }
}

/**
 * Builds the scripted harness. Interaction, call, message and tool ids come from process-wide counters
 * (`perm_1`, `ask_1`, `call_1`, `msg_1`, `tool_1`, …), so they are unique per connection and deterministic.
 */
export const makeScriptedHarness = (options: ScriptedOptions = {}) =>
  Effect.gen(function* () {
    const signals = yield* ScriptedSignals
    const declaration = scriptedDeclaration(options)
    const violations = new Set(options.contractViolations ?? [])
    const counters = new Map<string, number>()
    const nextId = (prefix: string) => {
      const n = (counters.get(prefix) ?? 0) + 1
      counters.set(prefix, n)
      return `${prefix}_${n}`
    }

    const prepare = (request: PrepareRequest) =>
      Effect.gen(function* () {
        const raw = request.configuration.agent_options?.["scripted"]
        const decoded = raw === undefined ? undefined : decodePrepareOptions(raw)
        if (decoded !== undefined && decoded._tag === "Failure") {
          return yield* new PrepareFailed({ reason: "invalid agent_options.scripted" })
        }
        const opts = decoded?._tag === "Success" ? decoded.success : {}
        if (opts.prepare_sleep !== undefined) yield* Effect.sleep(toDuration(opts.prepare_sleep))
        if (opts.prepare_wait !== undefined) yield* signals.await(opts.prepare_wait)
        // A required MCP server must initialize before the Executor exists (nothing is submitted otherwise).
        yield* initializeRequired(request.mcpServers ?? []).pipe(
          Effect.mapError((e) => new PrepareFailed({ reason: `required MCP server ${e.index} did not initialize (${e.cause})` }))
        )
        // The native state is owned by the Executor's scope from the moment it exists: the release is the
        // last-resort stop (a no-op after a confirmed close), so an interrupted or failed preparation leaks nothing.
        const { executor } = yield* Effect.acquireRelease(
          makeExecutor(request, opts.close_fails ?? 0, opts.close_hangs ?? 0),
          ({ kill }) => kill
        )
        if (opts.prepare === "fail") {
          yield* executor.close.pipe(Effect.ignore)
          return yield* new PrepareFailed({ reason: "scripted preparation failure" })
        }
        if (opts.prepare === "fail_with_residue") {
          return yield* new PrepareFailed({ reason: "scripted preparation failure", residue: { close: executor.close } })
        }
        return executor as Executor
      })

    const makeExecutor = (request: PrepareRequest, initialCloseFails: number, initialCloseHangs: number) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const config = request.configuration
        const nativeSession = config.agent_session_id !== undefined && config.agent_session_id !== ""
          ? config.agent_session_id
          : `scripted-${request.executorId}`
        const executorState = { closeFails: initialCloseFails, closeHangs: initialCloseHangs, closed: false, busy: false }

        const close: Effect.Effect<void, CloseFailed> = Effect.suspend(() => {
          if (executorState.closed) return Effect.void
          if (executorState.closeHangs > 0) {
            executorState.closeHangs--
            return Effect.never
          }
          if (executorState.closeFails > 0) {
            executorState.closeFails--
            return Effect.fail(new CloseFailed({ reason: "scripted close failure" }))
          }
          executorState.closed = true
          return Scope.close(scope, Exit.void)
        })

        const startTurn = Effect.fnUntraced(function* (runId: RunId, input: MessageInput, sink: TurnSink) {
          if (executorState.closed) return yield* new StartFailed({ reason: "executor closed" })
          if (executorState.busy) return yield* new StartFailed({ reason: "executor busy" })
          executorState.busy = true
          return yield* makeTurn({ signals, violations, nextId, workspaceRoot: options.workspaceRoot, mcpServers: request.mcpServers ?? [] }, {
            runId,
            input,
            sink,
            config,
            nativeSession,
            scope,
            executorId: request.executorId,
            setCloseFails: (n) => {
              executorState.closeFails = n
            },
            setCloseHangs: (n) => {
              executorState.closeHangs = n
            },
            release: () => {
              executorState.busy = false
            }
          })
        })

        const executor = {
          startTurn,
          nativeSessionId: Effect.succeed(Option.some(nativeSession)),
          close
        } satisfies Executor
        /** Stops the native state without the scripted close faults; idempotent. */
        const kill = Effect.suspend(() => {
          executorState.closed = true
          return Scope.close(scope, Exit.void)
        })
        return { executor, kill }
      })

    const harness: Harness = { declaration, prepare }
    return harness
  })
