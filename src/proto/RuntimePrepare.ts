/**
 * Environment initialization and capability transfer: `runtime_prepare` (Core → Runtime, Envelope.id =
 * transfer id) and `runtime_prepare_result`. One transfer per connection. Sequence: begin → ready, ordered
 * chunks each answered by `received` with the new total, commit → completed. `received` confirms staged bytes,
 * not installation; `completed` confirms that operation, not that a later Turn ran. An unknown effect is
 * never reported as a rejection.
 */
import { Option, Schema } from "effect"
import { isCanonicalUuidString, NonNegativeInt } from "./Checks.js"
import { RuntimePrepareErrorCode } from "./ErrorCodes.js"
import { CapabilitySources, SourceMetadata } from "./Execution.js"
import { MaxInitializationEntries, MaxPluginSlot, MaxTransferBytes } from "./Limits.js"
import { validateLogicalPath } from "./Transfer.js"

export const RuntimePrepareStep = Schema.Literals(["begin", "chunk", "commit"])
export type RuntimePrepareStep = typeof RuntimePrepareStep.Type
export const RuntimePrepareAction = Schema.Literals(["skill", "plugin", "file", "initialize", "finalize"])
export type RuntimePrepareAction = typeof RuntimePrepareAction.Type

/** A typed initialization header: no file data travels with it. */
export const Initialization = Schema.Struct({
  action: Schema.Literals(["configure", "npm", "python", "setup"]),
  env: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  network: Schema.optionalKey(Schema.Literals(["enabled", "disabled"])),
  packages: Schema.optionalKey(Schema.Array(Schema.String)),
  command: Schema.optionalKey(Schema.String),
  cwd: Schema.optionalKey(Schema.String)
})
export type Initialization = typeof Initialization.Type

/** One frame of a runtime_prepare transfer; which members are allowed depends on `step` (validateRequest). */
export const RuntimePreparePayload = Schema.Struct({
  step: RuntimePrepareStep,
  environment_id: Schema.optionalKey(Schema.String),
  session_id: Schema.optionalKey(Schema.String),
  action: Schema.optionalKey(RuntimePrepareAction),
  slot: Schema.optionalKey(NonNegativeInt),
  skill: Schema.optionalKey(SourceMetadata),
  plugin: Schema.optionalKey(SourceMetadata),
  file: Schema.optionalKey(Schema.Struct({ path: Schema.String })),
  initialization: Schema.optionalKey(Initialization),
  sources: Schema.optionalKey(CapabilitySources),
  size_bytes: Schema.optionalKey(NonNegativeInt),
  sha256: Schema.optionalKey(Schema.String),
  offset: Schema.optionalKey(NonNegativeInt),
  /** Standard padded base64 of 1..64 KiB. */
  data: Schema.optionalKey(Schema.String)
})
export type RuntimePreparePayload = typeof RuntimePreparePayload.Type

export const RuntimePrepareOutcome = Schema.Literals(["ready", "received", "completed", "rejected", "failed", "unknown"])
export type RuntimePrepareOutcome = typeof RuntimePrepareOutcome.Type

export const RuntimePrepareResultPayload = Schema.Struct({
  outcome: RuntimePrepareOutcome,
  offset: Schema.optionalKey(NonNegativeInt),
  size_bytes: Schema.optionalKey(NonNegativeInt),
  error_code: Schema.optionalKey(RuntimePrepareErrorCode),
  exit_code: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 255 })))
})
export type RuntimePrepareResultPayload = typeof RuntimePrepareResultPayload.Type

// ---------------------------------------------------------------------------------------------- validators

/** Why a runtime_prepare frame is invalid (the Runtime answers `rejected` / `invalid_request`). */
export type RuntimePrepareIssue =
  | "identity" // begin without canonical environment_id / session_id
  | "header_count" // not exactly one of skill, plugin, file, initialization, sources
  | "action_mismatch" // the action does not match the header present
  | "slot" // slot outside 0..49, or on a non-plugin action
  | "size" // size_bytes outside its rule for the action
  | "digest" // sha256 missing, malformed, or present where not allowed
  | "path" // file.path or setup cwd invalid
  | "initialization" // initialization fields invalid for its action
  | "step_members" // a member that does not belong to this step

const SHA = /^[0-9a-f]{64}$/
const headerOf: Record<RuntimePrepareAction, keyof RuntimePreparePayload> = {
  skill: "skill",
  plugin: "plugin",
  file: "file",
  initialize: "initialization",
  finalize: "sources"
}
const beginOnly = ["environment_id", "session_id", "action", "slot", "skill", "plugin", "file", "initialization", "sources", "size_bytes", "sha256"] as const

const validateInitialization = (init: Initialization): boolean => {
  const lines = /[\u0000\r\n]/
  switch (init.action) {
    case "configure": {
      if (init.packages !== undefined || init.command !== undefined || init.cwd !== undefined) return false
      const env = Object.entries(init.env ?? {})
      if (env.length > MaxInitializationEntries) return false
      return env.every(([k, v]) => k !== "" && !k.includes("=") && !lines.test(k) && !v.includes("\u0000"))
    }
    case "npm":
    case "python": {
      if (init.network === undefined || init.env !== undefined || init.command !== undefined || init.cwd !== undefined) return false
      const pkgs = init.packages ?? []
      return pkgs.length >= 1 && pkgs.length <= MaxInitializationEntries &&
        pkgs.every((p) => p !== "" && !p.startsWith("-") && !lines.test(p))
    }
    case "setup":
      return init.network !== undefined && init.env === undefined && init.packages === undefined &&
        init.command !== undefined && init.command !== "" && !init.command.includes("\u0000") &&
        init.cwd !== undefined && Option.isNone(validateLogicalPath(init.cwd, { allowRoot: true }))
  }
}

/** The per-step member rules of a runtime_prepare frame (chunk offsets are checked by the transfer). */
export const validateRequest = (p: RuntimePreparePayload): Option.Option<RuntimePrepareIssue> => {
  if (p.step !== "begin") {
    if (beginOnly.some((k) => p[k] !== undefined)) return Option.some("step_members")
    if (p.step === "commit" && (p.data !== undefined || (p.offset ?? 0) !== 0)) return Option.some("step_members")
    if (p.step === "chunk" && (p.data === undefined || (p.offset ?? 0) > MaxTransferBytes)) return Option.some("step_members")
    return Option.none()
  }
  if (p.data !== undefined || (p.offset ?? 0) !== 0) return Option.some("step_members")
  if (!isCanonicalUuidString(p.environment_id ?? "") || !isCanonicalUuidString(p.session_id ?? "")) {
    return Option.some("identity")
  }
  const headers = (["skill", "plugin", "file", "initialization", "sources"] as const).filter((k) => p[k] !== undefined)
  if (headers.length !== 1 || p.action === undefined) return Option.some("header_count")
  if (headerOf[p.action] !== headers[0]) return Option.some("action_mismatch")
  if (p.action === "plugin" ? (p.slot ?? 0) > MaxPluginSlot : (p.slot ?? 0) !== 0) return Option.some("slot")
  const carriesBytes = p.action === "skill" || p.action === "plugin" || p.action === "file"
  const size = p.size_bytes ?? 0
  if (carriesBytes) {
    if (size > MaxTransferBytes || (p.action !== "file" && size === 0)) return Option.some("size")
    if (p.sha256 === undefined || !SHA.test(p.sha256)) return Option.some("digest")
  } else {
    if (size !== 0) return Option.some("size")
    if (p.sha256 !== undefined) return Option.some("digest")
  }
  if (p.file !== undefined && Option.isSome(validateLogicalPath(p.file.path, { allowRoot: false }))) {
    return Option.some("path")
  }
  if (p.initialization !== undefined && !validateInitialization(p.initialization)) return Option.some("initialization")
  return Option.none()
}

/** What the sender expects after its last frame. */
export type ExpectedReceipt =
  | { readonly step: "begin" }
  | { readonly step: "chunk"; readonly offset: number }
  | { readonly step: "commit"; readonly sizeBytes: number }

/**
 * Validates a result against the expected receipt (`ValidRuntimePrepareResult`): `ready` after begin,
 * `received` with the new total after a chunk, `completed` with the full size after commit; otherwise a
 * terminal `rejected` (with a rejection code, offset and size 0), `failed` (runtime_preparation_failed,
 * optional exit code) or `unknown` (runtime_preparation_unconfirmed). Any other combination invalidates the
 * receipt, and the sender then treats the transfer as unknown and never replays it.
 */
export const validateResult = (expected: ExpectedReceipt, r: RuntimePrepareResultPayload): boolean => {
  const offset = r.offset ?? 0
  const size = r.size_bytes ?? 0
  if (r.exit_code !== undefined && r.outcome !== "failed") return false
  switch (r.outcome) {
    case "ready":
      return expected.step === "begin" && r.error_code === undefined && offset === 0 && size === 0
    case "received":
      return expected.step === "chunk" && r.error_code === undefined && offset === expected.offset && size === 0
    case "completed":
      return expected.step === "commit" && r.error_code === undefined && offset === 0 && size === expected.sizeBytes
    case "rejected":
      return offset === 0 && size === 0 && r.error_code !== undefined &&
        ["invalid_request", "resource_unavailable", "runtime_preparation_capacity", "runtime_preparation_unsupported", "runtime_preparation_rejected"].includes(r.error_code)
    case "failed":
      return offset === 0 && size === 0 && r.error_code === "runtime_preparation_failed"
    case "unknown":
      return offset === 0 && size === 0 && r.error_code === "runtime_preparation_unconfirmed"
  }
}
