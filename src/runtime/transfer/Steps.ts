/**
 * What each `runtime_prepare` action does (reference part 2 §6.2), for Transfer.ts: the begin-time refusals, the
 * staging area of a byte-carrying action, and the action run at `commit`.
 *
 * | action       | staged in                                   | installed at commit                                  |
 * |--------------|---------------------------------------------|------------------------------------------------------|
 * | `file`       | a staging file beside `/workspace/<path>`   | atomic rename over the destination                    |
 * | `skill`      | `.agentwire/staging/<tag>/body`             | checked, extracted, renamed to `.agentwire/skills/<name>` |
 * | `plugin`     | `.agentwire/staging/<tag>/body`             | checked, extracted, renamed to `.agentwire/plugins/<slot>` |
 * | `initialize` | nothing                                     | Initialize.ts (`configure`, `npm`, `python`, `setup`) |
 * | `finalize`   | nothing                                     | Initialize.ts (`.agentwire/capabilities.json`)       |
 *
 * The `file` body goes through the process's `WorkspaceFs.openStaging`: the staging file and three-step install of
 * `workspace_write`, so one workspace implementation (or a test's wrapped one) sees every file installed.
 *
 * A destination that is a directory, a symlink or outside the root, and an archive that breaks a rule, are
 * `runtime_preparation_rejected` (nothing changed); an install whose final rename may have happened without proof
 * is `unknown` / `runtime_preparation_unconfirmed`.
 */
import { Effect, Result } from "effect"
import type { RuntimePreparePayload, RuntimePrepareResultPayload } from "../../proto/RuntimePrepare.js"
import type { Binding } from "../workspace/EnvironmentBinding.js"
import { installStaging, type NativeStaging, type WorkspaceFsShape } from "../workspace/WorkspaceFs.js"
import { CapabilityArchiveLimits, validSkillName } from "./internal/capabilityRules.js"
import { type InstallOutcome, openArchiveBody, OpenRefused, type StagedBody } from "./internal/staging.js"
import { initializationRefusal, runFinalize, runInitialization } from "./Initialize.js"

type Outcome = RuntimePrepareResultPayload

const rejected: Outcome = { outcome: "rejected", error_code: "runtime_preparation_rejected" }

/** `completed` with the body size (a zero size is omitted, as the Go peer's `omitempty` does). */
export const completed = (size: number): Outcome => (size === 0 ? { outcome: "completed" } : { outcome: "completed", size_bytes: size })

/** `file`, `skill` and `plugin` carry a body. */
export const carriesBytes = (p: RuntimePreparePayload): boolean => p.action === "file" || p.action === "skill" || p.action === "plugin"

/** The begin-time refusal of a valid header, if any (the binding and liveness were checked already). */
export const beginRefusal = (p: RuntimePreparePayload, binding: Binding, finalized: boolean): Outcome | undefined => {
  switch (p.action) {
    case "skill":
      if (finalized || !validSkillName(p.skill?.name ?? "")) return rejected
      return (p.size_bytes ?? 0) > CapabilityArchiveLimits.maxCompressed ? rejected : undefined
    case "plugin":
      if (finalized) return rejected
      return (p.size_bytes ?? 0) > CapabilityArchiveLimits.maxCompressed ? rejected : undefined
    case "initialize":
      return p.initialization === undefined ? rejected : initializationRefusal(p.initialization, binding)
    case "finalize":
      return finalized ? rejected : undefined
    default:
      return undefined
  }
}

/** A byte-carrying action's staging area: written chunk by chunk, installed once at commit, discarded at the end. */
export interface Body {
  /** Writes `data` at `offset` (all of it, or fails). */
  readonly write: (data: Uint8Array, offset: number) => Effect.Effect<void, unknown>
  /** Installs the complete, verified body. */
  readonly install: Effect.Effect<InstallOutcome>
  /** Removes the staging area (idempotent; retryable until it succeeds). */
  readonly discard: Effect.Effect<void, unknown>
}

const archiveBody = (body: StagedBody): Body => ({
  write: (data, offset) => Effect.try(() => body.write(data, offset)),
  // A throw out of an installer proves nothing about the installation: unknown, never rejected.
  install: Effect.tryPromise(() => body.install()).pipe(Effect.orElseSucceed(() => "unconfirmed" as const)),
  discard: Effect.tryPromise(() => body.discard())
})

/** `file`: the workspace's staging file; a failure before the rename changed nothing, one after it is unproven. */
const fileBody = (staging: NativeStaging): Body => ({
  write: staging.write,
  install: installStaging(staging).pipe(Effect.orElseSucceed(() => "refused" as const)),
  discard: staging.discard
})

/** Opens the staging area of a byte-carrying action; the refusal to send otherwise. */
export const openBody = (
  fs: WorkspaceFsShape,
  root: string,
  p: RuntimePreparePayload,
  tag: string
): Effect.Effect<Result.Result<Body, Outcome>> => {
  if (p.action === "file") {
    return fs.openStaging((p.file?.path ?? "").slice("/workspace/".length), `.agentwire-prepare-${tag}.tmp`).pipe(
      Effect.map(fileBody),
      Effect.mapError((f): Outcome => (f === "invalid_path" ? { outcome: "rejected", error_code: "invalid_request" } : rejected)),
      Effect.result
    )
  }
  return Effect.tryPromise({
    try: () => {
      const kind = p.action === "plugin" ? "plugin" : "skill"
      const metadata = (kind === "skill" ? p.skill : p.plugin)!
      return openArchiveBody(root, tag, { kind, metadata, slot: p.slot ?? 0 })
    },
    catch: (e): Outcome => (e instanceof OpenRefused && e.issue === "invalid_path" ? { outcome: "rejected", error_code: "invalid_request" } : rejected)
  }).pipe(Effect.map(archiveBody), Effect.result)
}

export interface CommitContext {
  readonly binding: Binding
  readonly body: Body | undefined
  /** This connection's `configure` environment (updated by `configure`). */
  readonly configured: Map<string, string>
  readonly childEnv: Readonly<Record<string, string>>
}

/** Runs the action at commit (a byte-carrying action's body is complete and its digest verified). */
export const commitAction = (p: RuntimePreparePayload, ctx: CommitContext): Effect.Effect<Outcome> => {
  if (p.action === "initialize") return runInitialization(p.initialization!, ctx.binding, ctx.configured, ctx.childEnv)
  if (p.action === "finalize") return runFinalize(p.sources ?? {}, ctx.binding.root)
  return ctx.body!.install.pipe(
    Effect.map((installed): Outcome =>
      installed === "installed"
        ? completed(p.size_bytes ?? 0)
        : installed === "refused"
        ? rejected
        : { outcome: "unknown", error_code: "runtime_preparation_unconfirmed" }
    )
  )
}
