/**
 * The `agentwire daemon` command line: flags, their environment fallbacks, the credential sources and the exit
 * codes. The daemon itself is replaced by a function that records the resolved configuration.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Duration, Effect, Exit, FileSystem, Option, Redacted, Ref } from "effect"
import { CliError, Command } from "effect/cli"
import { makeDaemonCommand } from "../../../src/bin/commands/daemon.js"
import { CommandFailed, teardown } from "../../../src/bin/Exit.js"
import type { DaemonConfig } from "../../../src/runtime/RuntimeConfig.js"

const parse = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const seen = yield* Ref.make<DaemonConfig | undefined>(undefined)
    const command = makeDaemonCommand({
      homeDir: "/home/op",
      pid: 1,
      run: (config) => Ref.set(seen, config)
    })
    const exit = yield* Command.runWith(command, { version: "test" })(args).pipe(
      Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))),
      Effect.exit
    )
    return { exit, config: yield* Ref.get(seen) }
  }).pipe(Effect.provide(NodeServices.layer))

const exitCodeOf = (exit: Exit.Exit<unknown, unknown>) => {
  let code = -1
  teardown(exit, (c) => {
    code = c
  })
  return code
}

describe("agentwire daemon (command line)", () => {
  it.effect("binds a local Environment from the flags or from their environment variables", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      const root = yield* fs.realPath(dir)
      const base = ["--core-url", "http://127.0.0.1:9000", "--device-id", "dev-9"]
      const env = { AGENTWIRE_CREDENTIAL: "cred-ENV" }
      const fromFlags = yield* parse([...base, "--environment-id", "env-1", "--workspace", dir, "--network-access", "enabled"], env)
      assert.deepStrictEqual(fromFlags.config?.environment, { environmentId: "env-1", root, configured: dir, networkAccess: "enabled" })
      const fromEnv = yield* parse(base, { ...env, AGENTWIRE_ENVIRONMENT_ID: "env-2", AGENTWIRE_WORKSPACE: dir })
      assert.deepStrictEqual(fromEnv.config?.environment, { environmentId: "env-2", root, configured: dir, networkAccess: "disabled" })
      const missing = yield* parse([...base, "--environment-id", "env-1", "--workspace", `${dir}/nope`], env)
      assert.strictEqual(exitCodeOf(missing.exit), 2)
      assert.isUndefined(missing.config)
      assert.isUndefined((yield* parse(base, env)).config?.environment)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("reads the documented flags", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(`${dir}/cred`, "cred-CLI-FILE\n")
      const { exit, config } = yield* parse([
        "--core-url",
        "http://127.0.0.1:9000/api/v1",
        "--device-id",
        "dev-9",
        "--credential-file",
        `${dir}/cred`,
        "--profile",
        `${dir}/profile`,
        "--max-active",
        "2",
        "--max-idle-executors",
        "0",
        "--idle-executor-ttl",
        "90 seconds",
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "--scripted-disable",
        "steering,permissions",
        "--scripted-unavailable",
        "--harness",
        "scripted",
        "--harness",
        "scripted",
        "--codex-path",
        "/opt/codex",
        "--codex-config",
        `model="m"`,
        "--codex-config",
        `model_provider="p"`,
        "--claude-code-path",
        "/opt/claude/bin/claude"
      ])
      assert.deepStrictEqual(exit, Exit.void)
      assert.deepStrictEqual(config?.core, { origin: "http://127.0.0.1:9000", apiBase: "http://127.0.0.1:9000/api/v1" })
      assert.strictEqual(config?.deviceId, "dev-9")
      assert.strictEqual(Redacted.value(config!.credential), "cred-CLI-FILE")
      assert.strictEqual(config?.profileDir, `${dir}/profile`)
      assert.strictEqual(config?.maxActive, 2)
      assert.strictEqual(config?.maxIdleExecutors, 0)
      assert.deepStrictEqual(config?.idleExecutorTtl, Duration.seconds(90))
      assert.strictEqual(config?.logFormat, "json")
      assert.deepStrictEqual(config?.logLevel, Option.some("Debug"))
      assert.deepStrictEqual(config?.scripted, { disabledCapabilities: ["steering", "permissions"], available: false })
      assert.deepStrictEqual(config?.harnessKinds, ["scripted"])
      assert.deepStrictEqual(config?.codex, { path: "/opt/codex", config: [`model="m"`, `model_provider="p"`] })
      assert.deepStrictEqual(config?.claudeCodePath, Option.some("/opt/claude/bin/claude"))
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("falls back to the AGENTWIRE_* environment variables", () =>
    Effect.gen(function* () {
      const { exit, config } = yield* parse([], {
        AGENTWIRE_CORE_URL: "https://core.example",
        AGENTWIRE_DEVICE_ID: "dev-env",
        AGENTWIRE_CREDENTIAL: "cred-CLI-ENV",
        AGENTWIRE_PROFILE: "/srv/agentwire",
        AGENTWIRE_MAX_ACTIVE: "3",
        AGENTWIRE_MAX_IDLE_EXECUTORS: "5",
        AGENTWIRE_IDLE_EXECUTOR_TTL: "2 minutes",
        AGENTWIRE_LOG_FORMAT: "json",
        AGENTWIRE_LOG_LEVEL: "warn",
        AGENTWIRE_SCRIPTED_DISABLE: "usage",
        AGENTWIRE_SCRIPTED_UNAVAILABLE: "true",
        AGENTWIRE_HARNESS: "scripted, claude_code",
        AGENTWIRE_CODEX_PATH: "/usr/local/bin/codex",
        AGENTWIRE_CODEX_CONFIG: `model="m"\n\n  model_provider="p"  \n`,
        AGENTWIRE_CLAUDE_CODE_PATH: "/usr/local/bin/claude"
      })
      assert.deepStrictEqual(exit, Exit.void)
      assert.strictEqual(config?.core.apiBase, "https://core.example/api/v1")
      assert.strictEqual(config?.deviceId, "dev-env")
      assert.strictEqual(Redacted.value(config!.credential), "cred-CLI-ENV")
      assert.strictEqual(config?.socketPath, "/srv/agentwire/agentwire.sock")
      assert.strictEqual(config?.maxActive, 3)
      assert.strictEqual(config?.maxIdleExecutors, 5)
      assert.deepStrictEqual(config?.idleExecutorTtl, Duration.minutes(2))
      assert.strictEqual(config?.logFormat, "json")
      assert.deepStrictEqual(config?.logLevel, Option.some("Warn"))
      assert.deepStrictEqual(config?.scripted, { disabledCapabilities: ["usage"], available: false })
      assert.deepStrictEqual(config?.harnessKinds, ["scripted", "claude_code"])
      assert.deepStrictEqual(config?.codex, { path: "/usr/local/bin/codex", config: [`model="m"`, `model_provider="p"`] })
      assert.deepStrictEqual(config?.claudeCodePath, Option.some("/usr/local/bin/claude"))
    }))

  it.effect("an unknown --harness kind is a usage error", () =>
    Effect.gen(function* () {
      const { exit, config } = yield* parse(["--harness", "claude_kode"], {
        AGENTWIRE_CORE_URL: "https://core.example",
        AGENTWIRE_DEVICE_ID: "dev-env",
        AGENTWIRE_CREDENTIAL: "cred-CLI-ENV"
      })
      assert.isUndefined(config)
      assert.isTrue(Exit.isFailure(exit))
    }))

  it.effect("a flag wins over its variable, and a credential file wins over AGENTWIRE_CREDENTIAL", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(`${dir}/cred`, "cred-FROM-ENV-FILE")
      const { config } = yield* parse(["--device-id", "dev-flag", "--profile", dir], {
        AGENTWIRE_CORE_URL: "https://core.example",
        AGENTWIRE_DEVICE_ID: "dev-env",
        AGENTWIRE_CREDENTIAL: "cred-INLINE",
        AGENTWIRE_CREDENTIAL_FILE: `${dir}/cred`
      })
      assert.strictEqual(config?.deviceId, "dev-flag")
      assert.strictEqual(Redacted.value(config!.credential), "cred-FROM-ENV-FILE")
      assert.strictEqual(config?.profileDir, dir)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a missing or invalid setting fails with exit code 2 and a message without the credential", () =>
    Effect.gen(function* () {
      const missing = yield* parse([], { AGENTWIRE_CREDENTIAL: "cred-CLI-SECRET" })
      assert.strictEqual(exitCodeOf(missing.exit), 2)
      assert.deepStrictEqual(
        missing.exit,
        Exit.fail(
          new CommandFailed({
            text: "invalid configuration: --core-url / AGENTWIRE_CORE_URL: missing: pass --core-url URL or set AGENTWIRE_CORE_URL",
            exitCode: 2
          })
        )
      )
      const badUrl = yield* parse(["--core-url", "https://core.example/?x=1", "--device-id", "d"], {
        AGENTWIRE_CREDENTIAL: "cred-CLI-SECRET"
      })
      assert.strictEqual(exitCodeOf(badUrl.exit), 2)
      assert.notInclude(String(Cause.squash((badUrl.exit as Exit.Failure<unknown, unknown>).cause)), "cred-CLI-SECRET")
      const badCredential = yield* parse(["--core-url", "https://core.example", "--device-id", "d"], {
        AGENTWIRE_CREDENTIAL: "cred CLI SECRET"
      })
      assert.strictEqual(exitCodeOf(badCredential.exit), 2)
      assert.notInclude(String(Cause.squash((badCredential.exit as Exit.Failure<unknown, unknown>).cause)), "CLI SECRET")
    }))

  it.effect("an unknown flag or an invalid flag value is a usage error (exit code 2)", () =>
    Effect.gen(function* () {
      const unknown = yield* parse(["--bogus"])
      assert.isTrue(Exit.isFailure(unknown.exit) && CliError.isCliError(Cause.squash(unknown.exit.cause)))
      assert.strictEqual(exitCodeOf(unknown.exit), 2)
      assert.strictEqual(exitCodeOf((yield* parse(["--max-active", "many"])).exit), 2)
      assert.strictEqual(exitCodeOf((yield* parse([], { AGENTWIRE_MAX_ACTIVE: "many" })).exit), 2)
      assert.strictEqual(exitCodeOf((yield* parse(["--log-format", "xml"])).exit), 2)
      const badLevel = yield* parse(["--core-url", "https://core.example", "--device-id", "d"], {
        AGENTWIRE_CREDENTIAL: "c",
        AGENTWIRE_LOG_LEVEL: "loud"
      })
      assert.strictEqual(exitCodeOf(badLevel.exit), 2)
    }))
})

describe("exit codes (teardown)", () => {
  it("success and interruption (a signal, after finalizers) exit 0", () => {
    assert.strictEqual(exitCodeOf(Exit.void), 0)
    assert.strictEqual(exitCodeOf(Exit.interrupt(1)), 0)
  })

  it("a permanent rejection exits 3, a configuration error 2, a defect 1", () => {
    assert.strictEqual(exitCodeOf(Exit.fail(new CommandFailed({ text: "rejected", exitCode: 3 }))), 3)
    assert.strictEqual(exitCodeOf(Exit.fail(new CommandFailed({ text: "config", exitCode: 2 }))), 2)
    assert.strictEqual(exitCodeOf(Exit.die(new Error("bug"))), 1)
  })
})
