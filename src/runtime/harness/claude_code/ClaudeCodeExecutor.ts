/**
 * The Claude Code Executor: one Session-owned `claude -p --input-format stream-json` process (reference
 * harnesses.md §3.1), prepared without model input and reused across settled Turns.
 *
 * Preparation runs in the Executor's Scope (the Harness contract): the scratch working directory (0700, the
 * Environment `none` home; owned as `scratch:<executor id>`, OwnedDirectory.ts) and the process are acquired
 * with `Effect.acquireRelease`, so a failed or interrupted preparation still kills the process group (released
 * first) and then removes the directory; a removal that fails there is retried until confirmed and reported as
 * the Executor's unconfirmed cleanup, never a defect. Preparation is bounded by `prepareTimeout` (spawn +
 * `initialize` handshake); on expiry it fails and the Scope's owner closes what was acquired. `close` is the
 * confirmed close: SIGTERM to the group, SIGKILL after the grace period, exit reaped, scratch directory removed;
 * it fails with `CloseFailed` (and the Runtime retries) while anything is left. After a confirmed close the
 * Scope's finalizers are no-ops.
 *
 * Native state: `CLAUDE_CONFIG_DIR` is per Core Session under the daemon profile
 * (`<profile>/claude-code/sessions/<session>/config`), so a later Executor of the same Session can resume its
 * native history; it is kept after close (it is the Session's history, not Executor residue).
 */
import { Deferred, Effect, Option, Queue, type Scope } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { randomUUID } from "node:crypto"
import type { PromptRequestPayload } from "../../../proto/Execution.js"
import { type RunId, unsafeMake } from "../../../proto/Ids.js"
import type { MessageInput } from "../../../proto/MessageInput.js"
import {
  CloseFailed,
  type Executor,
  NativeFailed,
  NativeUnknown,
  PrepareFailed,
  type PrepareRequest,
  StartFailed,
  type TurnSink
} from "../Harness.js"
import { spawn } from "../process/NativeProcess.js"
import { ownedDirectory } from "../OwnedDirectory.js"
import type { Ownership } from "../../Ownership.js"
import type { RuntimePolicy } from "../../RuntimePolicy.js"
import { type ClaudeCodeTurn, makeTurn } from "./ClaudeCodeTurn.js"
import { type FunctionCall, FunctionsServer, nativeToolName, onMcpMessage } from "./FunctionServer.js"
import { childEnv, type ClaudeCodeSettings, requiredNativeCapabilities } from "./ClaudeCodeSettings.js"
import { controlRequest, decodeLine, hasImages, type Json, type NativeMessage } from "./StreamJson.js"

export interface ClaudeCodeExecutor extends Executor {
  /** The process id (the "no orphan" checks). */
  readonly pid: number
}

const uuidShape = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const safeKey = /^[A-Za-z0-9._-]{1,128}$/

/** The native session files of a config dir, newest first. */
const sessionFiles = (configDir: string) =>
  Effect.promise(async () => {
    const projects = path.join(configDir, "projects")
    const dirs = await fs.readdir(projects).catch(() => [] as Array<string>)
    const files: Array<{ readonly id: string; readonly mtime: number }> = []
    for (const dir of dirs) {
      const entries = await fs.readdir(path.join(projects, dir)).catch(() => [] as Array<string>)
      for (const entry of entries) {
        const id = entry.endsWith(".jsonl") ? entry.slice(0, -".jsonl".length) : undefined
        if (id === undefined || !uuidShape.test(id)) continue
        const stat = await fs.stat(path.join(projects, dir, entry)).catch(() => undefined)
        if (stat !== undefined) files.push({ id, mtime: stat.mtimeMs })
      }
    }
    return files.sort((a, b) => b.mtime - a.mtime)
  })

/**
 * Which native session to resume: the requested one (it must exist in the Session's config dir, checked on
 * the file system, never by reading Claude's prose), or with `require_existing_native_session` and no id, the
 * Session's newest native session. None starts a fresh native session.
 */
const resumeTarget = (config: PromptRequestPayload, configDir: string) =>
  Effect.gen(function* () {
    const requested = config.agent_session_id ?? ""
    const unavailable = (reason: string) => new PrepareFailed({ reason, code: "history_unavailable" })
    if (requested !== "") {
      if (!uuidShape.test(requested)) return yield* unavailable("the native session id is not a Claude Code session id")
      const files = yield* sessionFiles(configDir)
      if (!files.some((f) => f.id === requested)) return yield* unavailable("no stored native session with that id")
      return Option.some(requested)
    }
    if (config.require_existing_native_session === true) {
      const files = yield* sessionFiles(configDir)
      if (files.length === 0) return yield* unavailable("the Session has no stored native session to recover")
      return Option.some(files[0]!.id)
    }
    return Option.none<string>()
  })

const modelOf = (config: PromptRequestPayload, settings: ClaudeCodeSettings): Option.Option<string> => {
  const model = config.agent_options?.["model"]
  return typeof model === "string" && model.trim() !== "" ? Option.some(model) : settings.model
}

/** Tools removed natively by the execution controls, checked again against `system/init.tools`. */
const disallowedTools = (config: PromptRequestPayload): ReadonlyArray<string> => [
  ...(config.execution_controls?.web_search === "disabled" ? ["WebSearch"] : []),
  ...(config.disable_subagents === true ? ["Task", "Agent", "Workflow"] : [])
]

export const prepareExecutor = (
  settings: ClaudeCodeSettings,
  binary: string,
  request: PrepareRequest
): Effect.Effect<ClaudeCodeExecutor, PrepareFailed, Scope.Scope | Ownership | RuntimePolicy> =>
  Effect.gen(function* () {
    const config = request.configuration
    const io = <A>(reason: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: () => new PrepareFailed({ reason }) })
    const key = request.sessionId !== undefined && safeKey.test(request.sessionId)
      ? `session-${request.sessionId}`
      : `executor-${safeKey.test(request.executorId) ? request.executorId : randomUUID()}`
    const sessionDir = path.join(settings.stateDir, "sessions", key)
    const configDir = path.join(sessionDir, "config")
    yield* io("cannot create the Claude Code config directory", () => fs.mkdir(configDir, { recursive: true, mode: 0o700 }))
    const resume = yield* resumeTarget(config, configDir)

    const scratchRoot = path.join(settings.stateDir, "scratch")
    yield* io("cannot create the scratch root", () => fs.mkdir(scratchRoot, { recursive: true, mode: 0o700 }))
    const scratchDir = yield* ownedDirectory({
      resource: `scratch:${request.executorId}`,
      label: "the scratch directory",
      create: io("cannot create the scratch directory", () => fs.mkdtemp(path.join(scratchRoot, "exec-"))),
      removeDirectory: settings.removeDirectory
    })
    const scratch = scratchDir.path
    const tmpDir = path.join(scratch, "tmp")
    yield* io("cannot create the scratch tmp directory", () => fs.mkdir(tmpDir, { mode: 0o700 }))

    const model = modelOf(config, settings)
    const disallowed = disallowedTools(config)
    const functions = request.declaration.capabilities.function_tools ? config.function_tools ?? [] : []
    const args = [
      "-p",
      "--output-format", "stream-json",
      "--verbose",
      "--input-format", "stream-json",
      "--include-partial-messages",
      "--replay-user-messages",
      "--permission-prompt-tool", "stdio",
      "--permission-mode", "default",
      ...Option.match(model, { onNone: () => [], onSome: (m) => ["--model", m] }),
      ...Option.match(resume, { onNone: () => [], onSome: (id) => ["--resume", id] }),
      ...(disallowed.length === 0 ? [] : ["--disallowedTools", ...disallowed]),
      // Core's functions run without a permission prompt: Core itself answers them.
      ...(functions.length === 0 ? [] : ["--allowedTools", ...functions.map((t) => nativeToolName(t.name))])
    ]
    const proc = yield* spawn({
      command: binary,
      args,
      cwd: scratch,
      // Core's functions are offered to the model directly, never deferred behind ToolSearch (tool_search is false).
      env: { ...childEnv(settings, { home: sessionDir, configDir, tmpDir }), ...(functions.length === 0 ? {} : { ENABLE_TOOL_SEARCH: "false" }) },
      grace: settings.grace
    }).pipe(Effect.mapError((e) => new PrepareFailed({ reason: `cannot start Claude Code: ${e.reason}`.slice(0, 256) })))
    settings.observeSpawn?.(proc.pid)

    // ------------------------------------------------------------------------------------------ routing
    const pending = new Map<string, Deferred.Deferred<{ readonly ok: boolean; readonly response: Json }>>()
    const state = {
      current: undefined as ClaudeCodeTurn | undefined,
      sessionId: Option.getOrUndefined(resume),
      closed: false,
      broken: undefined as string | undefined,
      requests: 0,
      interactions: 0
    }
    const scope = yield* Effect.scope

    const checkInit = (m: Extract<NativeMessage, { type: "init" }>): string | undefined => {
      const missing = requiredNativeCapabilities.filter((c) => !m.capabilities.includes(c))
      if (missing.length > 0) return `Claude Code lacks ${missing.join(", ")}`
      if (state.sessionId !== undefined && state.sessionId !== m.sessionId) return "the native session id changed"
      const present = disallowed.filter((t) => m.tools.includes(t))
      if (present.length > 0) return `disallowed tools still offered: ${present.join(", ")}`
      return undefined
    }

    const route = (m: NativeMessage): Effect.Effect<void> =>
      Effect.gen(function* () {
        if (m.type === "control_response") {
          const waiter = pending.get(m.requestId)
          pending.delete(m.requestId)
          if (waiter !== undefined) yield* Deferred.succeed(waiter, { ok: m.ok, response: m.response })
          return
        }
        if (m.type === "mcp_message") {
          return yield* onMcpMessage(functionServer, m.requestId, m.serverName, m.message).pipe(Effect.ignore)
        }
        if (m.type === "init") {
          const problem = checkInit(m)
          if (problem !== undefined) {
            state.broken = problem
            const current = state.current
            if (current !== undefined) yield* current.onLost(problem)
            return
          }
          state.sessionId = m.sessionId
        }
        const current = state.current
        if (current !== undefined) yield* current.onMessage(m)
      })

    const lost = (reason: string) =>
      Effect.gen(function* () {
        state.broken = state.broken ?? reason
        const current = state.current
        if (current !== undefined) yield* current.onLost(reason)
      })

    yield* Effect.gen(function* () {
      while (true) yield* route(decodeLine(yield* Queue.take(proc.lines)))
    }).pipe(Effect.asVoid, Effect.ignore, Effect.andThen(lost("Claude Code exited")), Effect.forkIn(scope))

    const write = (line: string) =>
      proc.writeLine(line).pipe(Effect.mapError((e) => new NativeUnknown({ operation: "write", reason: e.reason })))

    const functionServer = {
      tools: functions,
      write: (line: string) => write(line),
      call: (call: FunctionCall) => (state.current === undefined ? Effect.succeed(false) : Effect.as(state.current.onFunctionCall(call), true))
    }

    const control = (request: Json) =>
      Effect.gen(function* () {
        const id = `req_${++state.requests}`
        const waiter = yield* Deferred.make<{ readonly ok: boolean; readonly response: Json }>()
        pending.set(id, waiter)
        yield* write(controlRequest(id, request))
        return waiter
      })

    // ------------------------------------------------------------------------------------------ handshake
    const init = yield* control({ subtype: "initialize", ...(functions.length === 0 ? {} : { sdkMcpServers: [FunctionsServer] }) }).pipe(
      Effect.flatMap(Deferred.await),
      Effect.timeoutOption(settings.prepareTimeout),
      Effect.catch(() => Effect.succeedNone)
    )
    if (Option.isNone(init) || !init.value.ok) {
      return yield* new PrepareFailed({
        reason: Option.isNone(init) ? "Claude Code did not answer initialize in time" : "Claude Code refused initialize"
      })
    }

    // ------------------------------------------------------------------------------------------ executor
    const startTurn = (runId: RunId, input: MessageInput, sink: TurnSink) =>
      Effect.gen(function* () {
        if (state.closed) return yield* new StartFailed({ reason: "executor closed" })
        if (state.broken !== undefined) return yield* new StartFailed({ reason: "executor unusable" })
        if (state.current !== undefined) return yield* new StartFailed({ reason: "executor busy" })
        if (hasImages(input) && !request.declaration.capabilities.message_images) {
          return yield* new StartFailed({ reason: "image input is not supported" })
        }
        yield* Effect.annotateCurrentSpan({ run_id: runId })
        const turn: ClaudeCodeTurn = yield* makeTurn({
          write,
          interrupt: control({ subtype: "interrupt", cancel_queued: true }).pipe(
            Effect.tap((waiter) =>
              Deferred.await(waiter).pipe(
                Effect.flatMap(({ response }) =>
                  turn.onInterruptReceipt(Array.isArray(response.still_queued)
                    ? response.still_queued.filter((u): u is string => typeof u === "string")
                    : [])
                ),
                Effect.forkIn(scope)
              )
            ),
            Effect.asVoid,
            Effect.mapError((e) => new NativeFailed({ operation: "cancel", reason: e.reason }))
          ),
          uuid: Effect.sync(randomUUID),
          interactionId: (prefix) => unsafeMake.interactionId(`${prefix}_${++state.interactions}`),
          sessionId: () => state.sessionId,
          observeMessages: config.observe_messages === true,
          observeTools: config.observe_tool_observations === true,
          ended: () =>
            Effect.sync(() => {
              state.current = undefined
            })
        }, sink)
        state.current = turn
        yield* turn.submit(input)
        return turn.turn
      })

    const close: Effect.Effect<void, CloseFailed> = Effect.gen(function* () {
      state.closed = true
      yield* proc.terminate.pipe(
        Effect.mapError((e) => new CloseFailed({ reason: `${e.count} native processes outlived SIGKILL` }))
      )
      yield* lost("executor closed")
      yield* scratchDir.remove
    })

    return {
      pid: proc.pid,
      startTurn,
      nativeSessionId: Effect.sync(() => Option.fromNullishOr(state.sessionId)),
      close
    } satisfies ClaudeCodeExecutor
  })
