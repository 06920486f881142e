/**
 * A Session's environment initialization as the operator API takes it (`initialization` of
 * `POST /api/v1/operator/sessions`), its checks at creation, the ordered `runtime_prepare` steps it becomes,
 * and the public view of its progress.
 *
 * Decisions (docs/dev-core.md "Session initialization"):
 * - Bytes travel in the request, base64 (`content_base64` / `archive_base64`); UTF-8 text may be given as
 *   `content`. Core never reads a path of its own machine on an operator's behalf (the CLI reads local files
 *   and sends their bytes), so the operator token is no file-read primitive on Core's host.
 * - Bounds checked before anything is stored: at most 100 files and 50 skills, a skill archive at most 5 MiB
 *   (the Runtime's bound), all bytes together at most 16 MiB, `env` at most 1000 variables, and every step's
 *   `begin` header valid per the proto validator (paths under `/workspace`, skill name grammar, setup cwd).
 * - Order: files, skills, then `configure` (env) and `setup`: `configure` is connection-scoped on the Runtime,
 *   so it is sent right before the setup command that needs it (and again with it when a retry moves the
 *   remaining steps to a new connection).
 * - `env` values are secret-bearing (they may carry keys): stored, sent, never returned (names only) or logged.
 *   The setup command text is returned to the operator but never logged.
 * - `finalize` is not sent: nothing in this Core reads the frozen capability selection yet, and a finalized
 *   Environment refuses the skills of a later Session on the same workspace.
 */
import { Option, Schema } from "effect"
import { Checks } from "../../proto/index.js"
import type { SourceMetadata } from "../../proto/Execution.js"
import { MaxInitializationEntries } from "../../proto/Limits.js"
import { validateRequest } from "../../proto/RuntimePrepare.js"
import type { TransferId } from "../../proto/Ids.js"
import { beginPayload, type PrepareAction } from "../prepare/RuntimePrepare.js"

export const MaxInitFiles = 100
export const MaxInitSkills = 50
export const MaxSkillArchiveBytes = 5 * 1024 * 1024
export const MaxInitBytes = 16 * 1024 * 1024
/** The create-Session body may carry the initialization's bytes (base64 of at most 16 MiB, plus JSON). */
export const MaxCreateSessionBodyBytes = 24 * 1024 * 1024

const Base64 = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9+/]*={0,2}$/))

export const InitFile = Schema.Struct({
  /** The logical destination, `/workspace/...`. */
  path: Schema.String,
  /** UTF-8 text (exactly one of `content` and `content_base64`). */
  content: Schema.optionalKey(Schema.String),
  content_base64: Schema.optionalKey(Base64)
})
export type InitFile = typeof InitFile.Type

export const InitSkill = Schema.Struct({
  /** Must equal the `name` of the archive's `SKILL.md` front matter (`^[a-z0-9]+(?:[-_][a-z0-9]+)*$`, ≤ 64). */
  name: Schema.String.check(Checks.isNonBlank),
  /** Must equal its `description`. */
  description: Schema.String.check(Checks.isNonBlank),
  /** The zip archive (one root directory holding `SKILL.md`), base64. */
  archive_base64: Base64
})
export type InitSkill = typeof InitSkill.Type

export const InitSetup = Schema.Struct({
  command: Schema.String.check(Checks.isNonBlank),
  /** A directory under `/workspace` (default `/workspace`). */
  cwd: Schema.optionalKey(Schema.String),
  /** Default: `enabled` when the Environment's network access is `enabled`, else `disabled`. */
  network: Schema.optionalKey(Schema.Literals(["enabled", "disabled"]))
})

export const InitializationRequest = Schema.Struct({
  files: Schema.optionalKey(Schema.Array(InitFile)),
  skills: Schema.optionalKey(Schema.Array(InitSkill)),
  /** Variables the setup command runs with (`configure`). Secret-bearing: never returned or logged. */
  env: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  setup: Schema.optionalKey(InitSetup)
})
export type InitializationRequest = typeof InitializationRequest.Type

export type StepKind = "file" | "skill" | "configure" | "setup"

/** One planned step: what the view shows (`label`, never bytes or env values) and what is sent. */
export interface PlannedStep {
  readonly kind: StepKind
  readonly label: string
  readonly bytesTotal: number
  readonly action: PrepareAction
}

const bytesOf = (file: InitFile): Uint8Array =>
  file.content !== undefined ? new TextEncoder().encode(file.content) : Buffer.from(file.content_base64 ?? "", "base64")

/** The steps of an initialization, in the order they are sent. */
export const plan = (init: InitializationRequest, networkAccess: string | undefined): ReadonlyArray<PlannedStep> => {
  const steps: Array<PlannedStep> = []
  for (const f of init.files ?? []) {
    const body = bytesOf(f)
    steps.push({ kind: "file", label: f.path, bytesTotal: body.length, action: { action: "file", path: f.path, body } })
  }
  for (const s of init.skills ?? []) {
    const body = Buffer.from(s.archive_base64, "base64")
    const metadata: SourceMetadata = { type: "inline", name: s.name, description: s.description }
    steps.push({ kind: "skill", label: s.name, bytesTotal: body.length, action: { action: "skill", metadata, body } })
  }
  if (init.env !== undefined && Object.keys(init.env).length > 0) {
    steps.push({ kind: "configure", label: "env", bytesTotal: 0, action: { action: "initialize", initialization: { action: "configure", env: init.env } } })
  }
  if (init.setup !== undefined) {
    const network = init.setup.network ?? (networkAccess === "enabled" ? "enabled" : "disabled")
    steps.push({
      kind: "setup",
      label: "setup",
      bytesTotal: 0,
      action: { action: "initialize", initialization: { action: "setup", command: init.setup.command, cwd: init.setup.cwd ?? "/workspace", network } }
    })
  }
  return steps
}

const SkillName = /^[a-z0-9]+(?:[-_][a-z0-9]+)*$/
const placeholderTransfer = "00000000-0000-4000-8000-000000000000" as TransferId

/**
 * Why an initialization cannot run (checked at Session creation, before anything is stored): bounds, content
 * members, skill names, and each step's begin header through the proto validator with the Session's real ids.
 */
export const initializationIssue = (
  init: InitializationRequest,
  ids: { readonly environmentId: string; readonly sessionId: string; readonly networkAccess: string | undefined }
): Option.Option<string> => {
  const files = init.files ?? []
  const skills = init.skills ?? []
  if (files.length > MaxInitFiles) return Option.some(`at most ${MaxInitFiles} files`)
  if (skills.length > MaxInitSkills) return Option.some(`at most ${MaxInitSkills} skills`)
  if (Object.keys(init.env ?? {}).length > MaxInitializationEntries) return Option.some(`env: at most ${MaxInitializationEntries} variables`)
  if (init.env !== undefined && init.setup === undefined) return Option.some("env is for the setup command: give setup too")
  for (const [i, f] of files.entries()) {
    if ((f.content === undefined) === (f.content_base64 === undefined)) {
      return Option.some(`files[${i}]: give exactly one of content and content_base64`)
    }
  }
  const names = new Set<string>()
  for (const [i, s] of skills.entries()) {
    if (s.name.length > 64 || !SkillName.test(s.name)) return Option.some(`skills[${i}].name must match ^[a-z0-9]+(?:[-_][a-z0-9]+)*$ (at most 64)`)
    if (names.has(s.name)) return Option.some(`skills[${i}].name is given twice`)
    names.add(s.name)
  }
  const steps = plan(init, ids.networkAccess)
  let total = 0
  for (const step of steps) {
    total += step.bytesTotal
    if (step.kind === "skill" && (step.bytesTotal === 0 || step.bytesTotal > MaxSkillArchiveBytes)) {
      return Option.some(`skill ${step.label}: the archive must hold 1 byte to 5 MiB`)
    }
  }
  if (total > MaxInitBytes) return Option.some("the initialization's bytes exceed 16 MiB")
  const paths = new Set<string>()
  for (const step of steps) {
    if (step.kind === "file") {
      if (paths.has(step.label)) return Option.some(`file ${step.label} is given twice`)
      paths.add(step.label)
    }
    const issue = validateRequest(beginPayload({
      transferId: placeholderTransfer,
      environmentId: ids.environmentId,
      sessionId: ids.sessionId,
      step: step.action
    }))
    if (Option.isSome(issue)) return Option.some(`${step.kind} ${step.kind === "configure" ? "env" : step.label}: invalid (${issue.value})`)
  }
  return Option.none()
}

/** Where a step, or the whole initialization, stands. */
export const StepState = Schema.Literals(["pending", "running", "completed", "failed", "unknown"])
export type StepState = typeof StepState.Type

/** The persisted progress of one step (no bytes, no env values). */
export interface StepProgress {
  readonly kind: StepKind
  readonly label: string
  readonly state: StepState
  readonly bytes_sent: number
  readonly bytes_total: number
  /** The Runtime's code (a rejection or `runtime_preparation_failed`) or Core's reason (`connection_lost`, …). */
  readonly error_code?: string
  readonly exit_code?: number
}

/** The initialization as `GET /sessions/:id` shows it. */
export interface InitializationView {
  readonly state: StepState
  /** The index of the step running or last attempted (null before the first). */
  readonly current_step: number | null
  readonly bytes_sent: number
  readonly bytes_total: number
  readonly steps: ReadonlyArray<StepProgress>
  /** For `failed` / `unknown`: the step kind and code, e.g. `setup: runtime_preparation_failed (exit 2)`. */
  readonly detail: string | null
  /** The names of the setup command's variables (their values are never returned). */
  readonly env_names: ReadonlyArray<string>
  readonly setup: { readonly command: string; readonly cwd: string } | null
}

export const initialProgress = (steps: ReadonlyArray<PlannedStep>): ReadonlyArray<StepProgress> =>
  steps.map((s) => ({ kind: s.kind, label: s.label, state: "pending", bytes_sent: 0, bytes_total: s.bytesTotal }))
