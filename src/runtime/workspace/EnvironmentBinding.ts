/**
 * The daemon's local Environment binding (protocol "Capability admission", reference part 1 §7.5): a daemon is
 * bound to at most one Environment — an id, a workspace directory (its real path is the root) and an immutable
 * network policy (`--environment-id`, `--workspace`, `--network-access`). Admission checks every
 * `local_environment` against it; a valid credential never chooses another binding.
 *
 * Without a binding, the capabilities that need one (`local_environment`, `workspace_read_preparation`,
 * `workspace_output_export`) are declared false by every kind; with one, the `scripted` kind declares them.
 */
import { Context, Effect, FileSystem, Layer, Option, Schema } from "effect"
import { fitsUtf8Bytes } from "../../proto/Checks.js"
import type { LocalEnvironment, NetworkAccess } from "../../proto/Execution.js"
import { EnvVars } from "../RuntimeEnv.js"

export interface Binding {
  /** The Environment id Core must name (`local_environment.id`), 1..128 bytes. */
  readonly environmentId: string
  /** The workspace root: the real path of `--workspace` (absolute, no symlink component). */
  readonly root: string
  /** `--workspace` as given, made absolute (Core may name either form as `workspace_directory`). */
  readonly configured: string
  readonly networkAccess: NetworkAccess
}

/** The process-level binding (absent: this daemon serves no local Environment). */
export class EnvironmentBinding extends Context.Service<EnvironmentBinding, { readonly binding: Option.Option<Binding> }>()(
  "agentwire/runtime/EnvironmentBinding"
) {
  static readonly layer = (binding: Binding | undefined): Layer.Layer<EnvironmentBinding> =>
    Layer.succeed(EnvironmentBinding, EnvironmentBinding.of({ binding: Option.fromNullishOr(binding) }))
}

/** Why a `local_environment` is not this daemon's Environment. */
export type BindingMismatch = "no_binding" | "environment_id" | "workspace_directory" | "network_access"

/**
 * Checks a requested Environment against the binding: the id must be equal; `workspace_directory` must equal
 * the root or the configured path (exactly, no normalisation of peer text); `network_access` absent means
 * `disabled` and must equal the daemon's immutable policy. None when it matches.
 */
export const checkBinding = (binding: Option.Option<Binding>, local: LocalEnvironment): Option.Option<BindingMismatch> => {
  if (Option.isNone(binding)) return Option.some("no_binding")
  const b = binding.value
  if (local.id !== b.environmentId) return Option.some("environment_id")
  if (local.workspace_directory !== b.root && local.workspace_directory !== b.configured) return Option.some("workspace_directory")
  if ((local.network_access ?? "disabled") !== b.networkAccess) return Option.some("network_access")
  return Option.none()
}

// ---------------------------------------------------------------------------------------------- settings

/** A binding setting is missing or invalid; the message names the flag and variable. */
export class BindingInvalid extends Schema.TaggedError<BindingInvalid>()("BindingInvalid", {
  setting: Schema.String,
  problem: Schema.String
}) {}

export interface BindingInput {
  readonly environmentId: Option.Option<string>
  readonly workspace: Option.Option<string>
  readonly networkAccess: Option.Option<string>
}

const settings = {
  environmentId: `--environment-id / ${EnvVars.environmentId}`,
  workspace: `--workspace / ${EnvVars.workspace}`,
  networkAccess: `--network-access / ${EnvVars.networkAccess}`
}

const networkValues: ReadonlyArray<NetworkAccess> = ["enabled", "disabled", "restricted"]

/**
 * Validates the binding settings. Both `--environment-id` and `--workspace` or neither; `--network-access`
 * only with them (default `disabled`). The workspace must be an existing directory; its real path is the root.
 * Workspace operations resolve paths through `/proc/self/fd` (workspace/internal/safeFs.ts), so a binding is
 * refused where it does not exist.
 */
export const resolveBinding = (
  input: BindingInput,
  absolute: (path: string) => string
): Effect.Effect<Binding | undefined, BindingInvalid, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fail = (setting: string, problem: string) => Effect.fail(new BindingInvalid({ setting, problem }))
    const id = Option.map(input.environmentId, (s) => s.trim())
    const dir = Option.map(input.workspace, (s) => s.trim())
    if (Option.isNone(id) && Option.isNone(dir)) {
      if (Option.isSome(input.networkAccess)) return yield* fail(settings.networkAccess, "needs --environment-id and --workspace")
      return undefined
    }
    if (Option.isNone(id)) return yield* fail(settings.environmentId, "missing: a workspace binding needs the Environment id")
    if (Option.isNone(dir)) return yield* fail(settings.workspace, "missing: a workspace binding needs the workspace directory")
    const environmentId = id.value
    if (environmentId === "") return yield* fail(settings.environmentId, "must not be empty")
    if (!fitsUtf8Bytes(environmentId, 128)) return yield* fail(settings.environmentId, "longer than 128 bytes")
    // eslint-disable-next-line no-control-regex
    if (/[\s\u0000-\u001f\u007f]/.test(environmentId)) {
      return yield* fail(settings.environmentId, "must not contain whitespace or control characters")
    }
    const network = Option.getOrElse(Option.map(input.networkAccess, (s) => s.trim()), () => "disabled")
    if (!(networkValues as ReadonlyArray<string>).includes(network)) {
      return yield* fail(settings.networkAccess, "expected enabled, disabled or restricted")
    }
    if (dir.value === "") return yield* fail(settings.workspace, "must not be empty")
    const fs = yield* FileSystem.FileSystem
    const configured = absolute(dir.value)
    const root = yield* fs.realPath(configured).pipe(
      Effect.mapError(() => new BindingInvalid({ setting: settings.workspace, problem: `${JSON.stringify(configured)} does not exist` }))
    )
    const info = yield* fs.stat(root).pipe(
      Effect.mapError(() => new BindingInvalid({ setting: settings.workspace, problem: `${JSON.stringify(configured)} cannot be read` }))
    )
    if (info.type !== "Directory") return yield* fail(settings.workspace, `${JSON.stringify(configured)} is not a directory`)
    const proc = yield* fs.exists("/proc/self/fd").pipe(Effect.orElseSucceed(() => false))
    if (!proc) return yield* fail(settings.workspace, "workspace operations need /proc/self/fd (Linux)")
    return { environmentId, root, configured, networkAccess: network as NetworkAccess }
  })

/**
 * The preparation rejection for a configuration's Environment, if any: none without `local_environment`;
 * `unsupported_configuration` when this daemon has no binding (nothing can check it); `invalid_configuration`
 * when it names another Environment or resource identity (reference part 1 §6: "the local workspace binding
 * rejects it").
 */
export const bindingRejection = (
  binding: Option.Option<Binding>,
  local: LocalEnvironment | undefined
): "unsupported_configuration" | "invalid_configuration" | undefined => {
  if (local === undefined) return undefined
  const mismatch = checkBinding(binding, local)
  if (Option.isNone(mismatch)) return undefined
  return mismatch.value === "no_binding" ? "unsupported_configuration" : "invalid_configuration"
}
