/**
 * Process-level settings of `runtime_prepare`: the environment initialization commands start from. Only an
 * allowlist of the daemon's variables passes (locale, home, path, temporary directory, package-registry
 * settings), so no credential of the daemon or a Harness (the `AGENTWIRE_*` credential, model keys) ever reaches
 * a setup command; `configure` adds the Session's own variables on top (Initialize.ts).
 */
import { Context, Layer } from "effect"

/** The daemon variables an initialization command inherits. */
export const childEnvAllowlist: ReadonlyArray<string> = [
  "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
  "npm_config_registry", "NPM_CONFIG_REGISTRY", "npm_config_cache", "PIP_INDEX_URL"
]

/** Keeps only the allowlisted, defined variables of `env`. */
export const childEnvFrom = (env: Readonly<Record<string, string | undefined>>): Readonly<Record<string, string>> => {
  const out: Record<string, string> = {}
  for (const key of childEnvAllowlist) {
    const value = env[key]
    if (value !== undefined) out[key] = value
  }
  return out
}

export class TransferSettings extends Context.Service<TransferSettings, {
  /** The base environment of initialization commands (already filtered). */
  readonly childEnv: Readonly<Record<string, string>>
}>()("agentwire/runtime/TransferSettings") {
  /** From the daemon's environment (src/bin passes it); absent: an empty environment. */
  static readonly layer = (env: Readonly<Record<string, string | undefined>> | undefined): Layer.Layer<TransferSettings> =>
    Layer.succeed(TransferSettings, TransferSettings.of({ childEnv: childEnvFrom(env ?? {}) }))
}
