/**
 * `agentwire daemon --config FILE` (docs/operations.md "Daemon config file"): a file with the same keys as the
 * daemon's flags, as JSON (`{"core-url": "…", "harness": ["scripted", "codex"]}`) or as `key = value` lines
 * (`#` comments, blank lines ignored, a repeatable key may repeat, values optionally in double quotes).
 *
 * Precedence: a flag on the command line, then the file, then the flag's environment variable, then the
 * default. The file is applied by turning each key the command line does not set into `--key=value` before
 * parsing, so every value goes through the flag's own validation and error message.
 *
 * Secrets are refused: the file may name the credential's file (`credential-file`) but never hold a
 * credential, token or key (any such key is an error that names the key, never its value). The file is read
 * whole, at most 64 KiB; an unknown key or a malformed line is an error naming the line, not echoing it.
 */
import { Effect, FileSystem } from "effect"
import { CommandFailed, ExitCode } from "./Exit.js"

/** The largest config file read. */
export const MaxConfigBytes = 64 * 1024

type KeyKind = "string" | "int" | "bool" | "list"

/** Every key of the file: the daemon's flags (kept in step with `daemonFlags` by test/bin/DaemonConfigFile.test.ts). */
export const DaemonConfigKeys: Readonly<Record<string, KeyKind>> = {
  "core-url": "string",
  "device-id": "string",
  "credential-file": "string",
  profile: "string",
  "max-active": "int",
  "max-idle-executors": "int",
  "idle-executor-ttl": "string",
  "log-format": "string",
  "log-level": "string",
  "scripted-disable": "string",
  "scripted-unavailable": "bool",
  "claude-code-path": "string",
  harness: "list",
  "codex-path": "string",
  "codex-config": "list",
  "environment-id": "string",
  workspace: "string",
  "network-access": "string",
  "metrics-port": "int"
}

/** Keys that would carry a secret: refused with a pointer to `credential-file` / the environment. */
const SecretKey = /(^|-)(credential|token|secret|password|api-key|key)$/

const problem = (text: string) => new CommandFailed({ text: `agentwire daemon --config: ${text}`, exitCode: ExitCode.usage })

const printableKey = (key: string) => (/^[a-z0-9_-]{1,40}$/i.test(key) ? key : "(a key that is not a flag name)")

export type ConfigEntries = ReadonlyArray<readonly [key: string, value: string | boolean]>

const unquote = (value: string) => (value.length >= 2 && value.startsWith("\"") && value.endsWith("\"") ? value.slice(1, -1) : value)

/** Parses the file's text (JSON or `key = value`) into entries, checking keys; never echoes a value. */
export const parseConfigText = (text: string): Effect.Effect<ConfigEntries, CommandFailed> =>
  Effect.gen(function* () {
    const entries: Array<readonly [string, string | boolean]> = []
    const check = (key: string, where: string) => {
      if (SecretKey.test(key) && key !== "credential-file") {
        return problem(`${printableKey(key)} (${where}) would hold a secret; put the credential in a file and name it with credential-file, or use the environment`)
      }
      if (DaemonConfigKeys[key] === undefined) return problem(`unknown key ${printableKey(key)} (${where}); the keys are the daemon's flag names without --`)
      return undefined
    }
    if (text.trimStart().startsWith("{")) {
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        return yield* problem("the file starts with { but is not valid JSON")
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return yield* problem("the JSON must be an object")
      for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
        const bad = check(key, `key "${printableKey(key)}"`)
        if (bad !== undefined) return yield* bad
        const kind = DaemonConfigKeys[key]!
        const values = Array.isArray(value) && kind === "list" ? value : [value]
        for (const v of values) {
          const ok = kind === "bool"
            ? typeof v === "boolean"
            : kind === "int"
            ? Number.isInteger(v) || (typeof v === "string" && /^\d+$/.test(v))
            : typeof v === "string"
          if (!ok) {
            return yield* problem(`${key} must be ${kind === "bool" ? "true or false" : kind === "int" ? "an integer" : kind === "list" ? "a string or an array of strings" : "a string"}`)
          }
          entries.push([key, typeof v === "boolean" ? v : String(v)])
        }
      }
      return entries
    }
    const lines = text.split(/\r?\n/)
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!.trim()
      if (line === "" || line.startsWith("#")) continue
      const eq = line.indexOf("=")
      if (eq <= 0) return yield* problem(`line ${i + 1} is not key = value`)
      const key = line.slice(0, eq).trim()
      const bad = check(key, `line ${i + 1}`)
      if (bad !== undefined) return yield* bad
      const value = unquote(line.slice(eq + 1).trim())
      if (DaemonConfigKeys[key] === "bool") {
        if (value !== "true" && value !== "false") return yield* problem(`${key} (line ${i + 1}) must be true or false`)
        entries.push([key, value === "true"])
      } else {
        if (DaemonConfigKeys[key] !== "list" && entries.some(([k]) => k === key)) {
          return yield* problem(`${key} is set twice (line ${i + 1})`)
        }
        entries.push([key, value])
      }
    }
    return entries
  })

/** The flag names the command line sets (`--name value`, `--name=value`), for the precedence rule. */
export const flagsOnCommandLine = (args: ReadonlyArray<string>): ReadonlySet<string> =>
  new Set(args.filter((a) => a.startsWith("--")).map((a) => a.slice(2).split("=")[0]!))

/** The config file's path in the daemon's arguments (`--config FILE` or `--config=FILE`), if any. */
export const configPath = (args: ReadonlyArray<string>): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--config") return args[i + 1]
    if (arg.startsWith("--config=")) return arg.slice("--config=".length)
  }
  return undefined
}

/** The arguments the file adds: `--key=value` for every key the command line does not set. */
export const configArgs = (entries: ConfigEntries, commandLine: ReadonlySet<string>): ReadonlyArray<string> =>
  entries.flatMap(([key, value]) => {
    if (commandLine.has(key)) return []
    if (typeof value === "boolean") return value ? [`--${key}`] : []
    return [`--${key}=${value}`]
  })

/**
 * The binary's arguments with a daemon config file applied: unchanged unless they run `daemon` with
 * `--config` (and not `--help`). A file that cannot be read or is invalid is one line, exit 2.
 */
export const expandDaemonConfig = (
  argv: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>, CommandFailed, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    if (argv[0] !== "daemon") return argv
    const rest = argv.slice(1)
    if (rest.includes("--help") || rest.includes("-h")) return argv
    const path = configPath(rest)
    if (path === undefined) return argv
    if (path === "" || path.startsWith("--")) return yield* problem("--config needs a file path")
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(path).pipe(Effect.mapError(() => problem(`cannot read ${path}`)))
    if (info.type !== "File") return yield* problem(`${path} is not a regular file`)
    if (Number(info.size) > MaxConfigBytes) return yield* problem(`${path} is larger than ${MaxConfigBytes / 1024} KiB`)
    const text = yield* fs.readFileString(path).pipe(Effect.mapError(() => problem(`cannot read ${path}`)))
    const entries = yield* parseConfigText(text)
    return ["daemon", ...configArgs(entries, flagsOnCommandLine(rest)), ...rest]
  })
