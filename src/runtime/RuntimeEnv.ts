/**
 * The daemon's environment variables: the name of each setting's variable (the fallback of the flag with the
 * same meaning), their `Config` readers (tests use a ConfigProvider instead of the process environment) and the
 * log level names. Re-exported by RuntimeConfig.
 */
import { Config, type LogLevel, Option, Schema } from "effect"


/** Environment variable of each setting (each is the fallback of the flag with the same meaning). */
export const EnvVars = {
  coreUrl: "AGENTWIRE_CORE_URL",
  deviceId: "AGENTWIRE_DEVICE_ID",
  credential: "AGENTWIRE_CREDENTIAL",
  credentialFile: "AGENTWIRE_CREDENTIAL_FILE",
  profile: "AGENTWIRE_PROFILE",
  maxActive: "AGENTWIRE_MAX_ACTIVE",
  maxIdleExecutors: "AGENTWIRE_MAX_IDLE_EXECUTORS",
  idleExecutorTtl: "AGENTWIRE_IDLE_EXECUTOR_TTL",
  logLevel: "AGENTWIRE_LOG_LEVEL",
  logFormat: "AGENTWIRE_LOG_FORMAT",
  scriptedDisable: "AGENTWIRE_SCRIPTED_DISABLE",
  scriptedUnavailable: "AGENTWIRE_SCRIPTED_UNAVAILABLE",
  harness: "AGENTWIRE_HARNESS",
  codexPath: "AGENTWIRE_CODEX_PATH",
  codexConfig: "AGENTWIRE_CODEX_CONFIG",
  claudeCodePath: "AGENTWIRE_CLAUDE_CODE_PATH",
  environmentId: "AGENTWIRE_ENVIRONMENT_ID",
  workspace: "AGENTWIRE_WORKSPACE",
  networkAccess: "AGENTWIRE_NETWORK_ACCESS"
} as const

export const LogFormat = Schema.Literals(["text", "json"])
export type LogFormat = typeof LogFormat.Type

/** The Config of each environment variable (missing = not set; an invalid value is a ConfigError). */
export const env = {
  coreUrl: Config.String(EnvVars.coreUrl),
  deviceId: Config.String(EnvVars.deviceId),
  credential: Config.Redacted(EnvVars.credential),
  credentialFile: Config.String(EnvVars.credentialFile),
  profile: Config.String(EnvVars.profile),
  maxActive: Config.Int(EnvVars.maxActive),
  maxIdleExecutors: Config.Int(EnvVars.maxIdleExecutors),
  idleExecutorTtl: Config.Duration(EnvVars.idleExecutorTtl),
  /** Case-insensitive, the same names as `--log-level` (see `parseLogLevel`). */
  logLevel: Config.String(EnvVars.logLevel),
  logFormat: Config.Literals(["text", "json"], EnvVars.logFormat),
  scriptedDisable: Config.String(EnvVars.scriptedDisable),
  scriptedUnavailable: Config.Boolean(EnvVars.scriptedUnavailable),
  /** Comma-separated Harness kind names (`HarnessKinds`). */
  harness: Config.String(EnvVars.harness),
  codexPath: Config.String(EnvVars.codexPath),
  /** One `KEY=VALUE` per line (the `codex` kind's `-c` overrides). */
  codexConfig: Config.String(EnvVars.codexConfig),
  /** The Claude Code binary of the `claude_code` kind. */
  claudeCodePath: Config.String(EnvVars.claudeCodePath),
  /** The bound Environment's id (with AGENTWIRE_WORKSPACE). */
  environmentId: Config.String(EnvVars.environmentId),
  /** The bound workspace directory (must exist; its real path is the root). */
  workspace: Config.String(EnvVars.workspace),
  /** enabled, disabled (default) or restricted. */
  networkAccess: Config.String(EnvVars.networkAccess)
} as const

/** `--log-level` names (case-insensitive): all, trace, debug, info, warn (warning), error, fatal, none. */
export const parseLogLevel = (text: string): Option.Option<LogLevel.LogLevel> => {
  const levels: Record<string, LogLevel.LogLevel> = {
    all: "All",
    trace: "Trace",
    debug: "Debug",
    info: "Info",
    warn: "Warn",
    warning: "Warn",
    error: "Error",
    fatal: "Fatal",
    none: "None"
  }
  const level = levels[text.trim().toLowerCase()]
  return level === undefined ? Option.none() : Option.some(level)
}
