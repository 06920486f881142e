/**
 * One Codex Executor = one `codex app-server` process with its own `CODEX_HOME` and a private scratch working
 * directory (Environment `none`), holding one native thread (reference harnesses.md §2.2, §6).
 *
 * `prepareExecutor` runs inside the Executor's scope: the scratch directory (owned as `scratch:<executor id>`),
 * a per-Executor CODEX_HOME (`home:<executor id>`; a Session's home is kept), the process and the client's reader
 * are acquired there with `Effect.acquireRelease`, so an interrupted or failed preparation releases them in
 * reverse: the process is stopped TERM → KILL and reaped first, then the directories are removed. A removal
 * that fails there is retried until confirmed and reported as the Executor's unconfirmed cleanup
 * (OwnedDirectory.ts), never a defect. `close` is the confirmed close: it stops the process and waits for its
 * exit, then removes the scratch directory and a per-Executor home (one attempt each; `CloseFailed` while one
 * is left, and the Runtime retries the close); the scope's releases are then no-ops.
 *
 * A thread is started (`thread/start`) or, with `agent_session_id`, strictly resumed (`thread/resume`); an
 * unknown thread fails preparation with `history_unavailable` before any input.
 */
import { Deferred, Duration, Effect, Option, Queue, Redacted, type Scope } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import type { RunId } from "../../../proto/Ids.js"
import { unsafeMake } from "../../../proto/Ids.js"
import type { MessageInput } from "../../../proto/MessageInput.js"
import { CloseFailed, type Executor, PrepareFailed, type PrepareRequest, StartFailed, type TurnSink } from "../Harness.js"
import { type NativeProcess, spawn } from "../process/NativeProcess.js"
import { type OwnedDirectory, ownedDirectory, type RemoveDirectory } from "../OwnedDirectory.js"
import type { Ownership } from "../../Ownership.js"
import type { RuntimePolicy } from "../../RuntimePolicy.js"
import * as P from "./CodexProtocol.js"
import { bounded, makeRpcClient, type RpcClient } from "./CodexRpc.js"
import { toUserInput } from "./CodexItems.js"
import { type CodexTurn, makeCodexTurn } from "./CodexTurn.js"

/** Budget for `initialize`, `thread/start`, `thread/resume` and `turn/start` responses. */
export const RequestBudget = Duration.seconds(30)
/** Grace for a voluntary exit after stdin closes, before TERM (the app-server exits on stdin EOF). */
export const ExitGrace = Duration.seconds(2)
/** Grace between TERM and KILL. */
export const TermGrace = Duration.seconds(3)
/** How long a Turn may keep reconnecting to an unreachable model endpoint without progress (CodexWatchdog.ts). */
export const ReconnectBudget = Duration.seconds(30)

/** How the daemon launches Codex (see CodexHarness.ts for resolution and discovery). */
export interface CodexLaunch {
  readonly command: string
  /** Arguments before `app-server` (the Node launcher path when run through `node`). */
  readonly prefix: ReadonlyArray<string>
  /** `-c KEY=VALUE` overrides forwarded to every app-server (values may hold no secret: env_key only). */
  readonly overrides: ReadonlyArray<string>
  /** The environment of every app-server (the daemon's, without AGENTWIRE_* variables and without `secrets`). */
  readonly env: Readonly<Record<string, string>>
  /** The provider keys (the variables `env_key` overrides name), unwrapped only into a child's environment. */
  readonly secrets: Readonly<Record<string, Redacted.Redacted<string>>>
  /** `<profile>/codex`: CODEX_HOME and scratch directories live below it. */
  readonly root: string
  /** Observer of every spawned app-server pid (leak tests); never affects behaviour. */
  readonly observeSpawn?: ((pid: number) => void) | undefined
  /** How long a Turn may keep reconnecting to an unreachable model endpoint (`ReconnectBudget`). */
  readonly reconnectBudget: Duration.Duration
  /** Test-only: replaces the removal of an Executor's directories (fault injection: a removal that fails). */
  readonly removeDirectory?: RemoveDirectory | undefined
}

/** The app-server arguments for a launch. */
export const appServerArgs = (launch: CodexLaunch, extra: ReadonlyArray<string> = []): Array<string> => [
  ...launch.prefix,
  "app-server",
  ...launch.overrides.flatMap((o) => ["-c", o]),
  ...extra.flatMap((o) => ["-c", o])
]

/** The complete environment of one app-server: the launch environment, the unwrapped keys and its CODEX_HOME. */
export const processEnv = (launch: CodexLaunch, home: string): Record<string, string> => {
  const env: Record<string, string> = { ...launch.env }
  for (const [k, v] of Object.entries(launch.secrets)) env[k] = Redacted.value(v)
  env["CODEX_HOME"] = home
  return env
}

/** The per-Session CODEX_HOME (kept: it holds the history `thread/resume` reads), or a per-Executor one. */
const homeDir = (root: string, request: PrepareRequest) =>
  request.sessionId === undefined
    ? { path: Path.join(root, "homes", `executor-${request.executorId}`), keep: false }
    : { path: Path.join(root, "homes", `session-${request.sessionId}`), keep: true }

const prepareFailed = (reason: string) => new PrepareFailed({ reason })

/** Creates a directory (mode 0700) under the profile. */
const makeDir = (path: string) =>
  Effect.tryPromise({
    try: () => Fs.mkdir(path, { recursive: true, mode: 0o700 }).then(() => path),
    catch: () => prepareFailed("could not create a Codex directory under the profile")
  })

/** A directory the Executor owns until its removal is confirmed (OwnedDirectory.ts). */
const executorDir = (launch: CodexLaunch, resource: string, label: string, path: string) =>
  ownedDirectory({ resource, label, create: makeDir(path), removeDirectory: launch.removeDirectory })

/** Prepares an Executor inside the caller's scope (the Executor's own child scope). */
export const prepareExecutor = (
  launch: CodexLaunch,
  request: PrepareRequest
): Effect.Effect<CodexExecutor, PrepareFailed, Scope.Scope | Ownership | RuntimePolicy> =>
  Effect.gen(function* () {
    const config = request.configuration
    const home = homeDir(launch.root, request)
    // A Session's home holds its history (kept); a per-Executor one is removed with the Executor.
    const ownedHome = home.keep
      ? yield* Effect.as(makeDir(home.path), undefined)
      : yield* executorDir(launch, `home:${request.executorId}`, "the Executor's CODEX_HOME", home.path)
    const scratchDir = yield* executorDir(
      launch,
      `scratch:${request.executorId}`,
      "the scratch directory",
      Path.join(launch.root, "scratch", request.executorId)
    )
    const scratch = scratchDir.path
    const extra = [
      ...(config.execution_controls?.web_search === "enabled" ? [] : [`web_search="disabled"`]),
      // subagent_control: no multi-agent tool at all.
      ...(config.disable_subagents === true ? ["features.multi_agent=false"] : []),
      // request_user_input reaches us as item/tool/requestUserInput (prompt_for_user_choice) in default mode.
      "features.default_mode_request_user_input=true",
      "suppress_unstable_features_warning=true"
    ]
    const proc = yield* spawn({
      command: launch.command,
      args: appServerArgs(launch, extra),
      cwd: scratch,
      env: processEnv(launch, home.path),
      grace: TermGrace
    }).pipe(Effect.mapError(() => prepareFailed(`could not start ${Path.basename(launch.command)}`)))
    launch.observeSpawn?.(proc.pid)
    const rpc = yield* makeRpcClient(proc)
    const mapRpc = (what: string) => (e: { readonly _tag: string }) => prepareFailed(`${what} failed (${e._tag})`)
    yield* rpc.call(
      "initialize",
      { clientInfo: { name: "agentwire", version: "0.1.0" }, capabilities: { experimentalApi: true } },
      P.InitializeResult,
      { timeout: RequestBudget }
    ).pipe(Effect.mapError(mapRpc("initialize")))
    yield* rpc.notify("initialized").pipe(Effect.mapError(mapRpc("initialized")))
    const threadParams = {
      cwd: scratch,
      approvalPolicy: request.declaration.capabilities.permissions ? "on-request" : "never",
      sandbox: "workspace-write"
    }
    const resumeId = config.agent_session_id
    const thread = resumeId !== undefined && resumeId !== ""
      ? yield* rpc.call("thread/resume", { ...threadParams, threadId: resumeId, excludeTurns: true }, P.ThreadResult, {
        timeout: RequestBudget
      }).pipe(Effect.mapError((e) =>
        e._tag === "RpcRejected"
          ? new PrepareFailed({ reason: "codex has no history for that thread", code: "history_unavailable" })
          : mapRpc("thread/resume")(e)
      ))
      : yield* rpc.call("thread/start", {
        ...threadParams,
        ...((config.function_tools ?? []).length === 0 ? {} : {
          dynamicTools: (config.function_tools ?? []).map((t) => ({
            name: t.name,
            description: t.description,
            inputSchema: t.parameters
          }))
        })
      }, P.ThreadResult, { timeout: RequestBudget }).pipe(Effect.mapError(mapRpc("thread/start")))
    return yield* makeExecutor({
      rpc,
      proc,
      threadId: thread.thread.id,
      dirs: ownedHome === undefined ? [scratchDir] : [scratchDir, ownedHome],
      fresh: resumeId === undefined || resumeId === "",
      config,
      reconnectBudget: launch.reconnectBudget
    })
  })

interface ExecutorParts {
  readonly rpc: RpcClient
  readonly proc: NativeProcess
  readonly threadId: string
  /** The directories the confirmed close removes (the scratch directory, a per-Executor home). */
  readonly dirs: ReadonlyArray<OwnedDirectory>
  readonly fresh: boolean
  readonly config: PrepareRequest["configuration"]
  readonly reconnectBudget: Duration.Duration
}

/** A Codex Executor: also names its app-server process (the process group leader), for supervision checks. */
export interface CodexExecutor extends Executor {
  readonly pid: number
}

const makeExecutor = (parts: ExecutorParts): Effect.Effect<CodexExecutor, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { proc, rpc, threadId } = parts
    const scope = yield* Effect.scope
    let active: CodexTurn | undefined
    let closed = false
    let interactions = 0
    // A fresh thread has no usage; a resumed one is rebased from its first update (CodexTurn).
    let lastTotal: P.TokenBreakdown | undefined = parts.fresh
      ? { totalTokens: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningOutputTokens: 0 }
      : undefined

    // One consumer, in native order: the active Turn first, then the leftovers.
    yield* Effect.gen(function* () {
      while (true) {
        const message = yield* Queue.take(rpc.incoming)
        const turn = active
        const handled = turn === undefined ? false : yield* turn.handle(message)
        if (handled) continue
        if (message._tag === "Notification" && message.method === "thread/tokenUsage/updated") {
          // Outside the active turn (a resumed thread restores its total): the next Turn's baseline.
          const usage = P.decode(P.TokenUsageUpdated)(message.params)
          if (Option.isSome(usage) && usage.value.threadId === threadId) lastTotal = usage.value.tokenUsage.total
          continue
        }
        if (message._tag === "ServerRequest") {
          // Nothing of ours asked for it: refuse so Codex is never left waiting.
          yield* rpc.respond(message.id, { decision: "decline" }).pipe(Effect.ignore)
          yield* Effect.logDebug("codex: declined a server request outside the active turn").pipe(
            Effect.annotateLogs({ method: bounded(message.method, 80) })
          )
        } else {
          yield* Effect.logDebug("codex: ignored a notification").pipe(Effect.annotateLogs({ method: bounded(message.method, 80) }))
        }
      }
    }).pipe(
      Effect.ignore,
      // The process output ended: the active Turn cannot complete natively.
      Effect.ensuring(Effect.suspend(() => (active === undefined ? Effect.void : active.processLost))),
      Effect.forkScoped
    )

    const startTurn = (runId: RunId, input: MessageInput, sink: TurnSink) =>
      Effect.gen(function* () {
        if (closed || Option.isSome(yield* proc.exit)) return yield* new StartFailed({ reason: "executor closed" })
        if (active !== undefined && !(yield* Deferred.isDone(active.settled))) {
          return yield* new StartFailed({ reason: "executor busy" })
        }
        if (input.some((m) => m.content.some((part) => part.type !== "input_text"))) {
          return yield* new StartFailed({ reason: "image input is not supported by this Codex adapter" })
        }
        const baseline = lastTotal
        const turn = yield* makeCodexTurn({
          runId,
          rpc,
          threadId,
          config: parts.config,
          sink,
          baseline,
          onTotal: (total) => {
            lastTotal = total
          },
          nextInteractionId: (prefix) => unsafeMake.interactionId(`${prefix}_${++interactions}`),
          reconnectBudget: parts.reconnectBudget,
          scope
        })
        active = turn
        const started = yield* rpc.call(
          "turn/start",
          { threadId, input: toUserInput(input), clientUserMessageId: runId },
          P.TurnStartResult,
          { timeout: RequestBudget }
        ).pipe(Effect.result)
        if (started._tag === "Success") turn.adoptTurnId(started.success.turn.id)
        else if (started.failure._tag !== "RpcUnknown") {
          // Definite: nothing was submitted.
          active = undefined
          return yield* new StartFailed({ reason: `turn/start failed (${started.failure._tag})` })
        }
        // Unknown: the input may have been written, so the Turn is returned; the turn id comes from turn/started.
        return turn.turn
      })

    const close: Effect.Effect<void, CloseFailed> = Effect.gen(function* () {
      closed = true
      yield* proc.stop(ExitGrace).pipe(
        Effect.mapError((e) => new CloseFailed({ reason: `${e.count} native processes outlived SIGKILL` }))
      )
      // After the exit: nothing writes into them any more.
      for (const dir of parts.dirs) yield* dir.remove
    })

    return {
      pid: proc.pid,
      startTurn,
      nativeSessionId: Effect.succeed(Option.some(threadId)),
      close
    } satisfies CodexExecutor
  })

