import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, FileSystem, Option, Redacted } from "effect"
import * as RuntimeConfig from "../../../src/runtime/RuntimeConfig.js"

const { DaemonConfigInvalid, parseCoreUrl, parseCredential, parseDeviceId, parseCapabilityList } = RuntimeConfig

const SECRET = "cred-CONFIG-9d2e"

const baseInput: RuntimeConfig.DaemonInput = {
  coreUrl: Option.some("https://core.example"),
  deviceId: Option.some("7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11"),
  credential: Option.some(Redacted.make(SECRET)),
  credentialFile: Option.none(),
  profile: Option.none(),
  maxActive: Option.none(),
  maxIdleExecutors: Option.none(),
  idleExecutorTtl: Option.none(),
  logLevel: Option.none(),
  logFormat: Option.none(),
  scriptedDisable: Option.none(),
  scriptedUnavailable: false
}

const resolve = (input: Partial<RuntimeConfig.DaemonInput>, homeDir = "/home/op") =>
  RuntimeConfig.resolve({ ...baseInput, ...input }, { homeDir }).pipe(Effect.provide(NodeServices.layer))

describe("RuntimeConfig.parseCoreUrl", () => {
  it.effect("accepts the Core origin or the machine API base", () =>
    Effect.gen(function* () {
      const origin = { origin: "https://core.example", apiBase: "https://core.example/api/v1" }
      assert.deepStrictEqual(yield* parseCoreUrl("https://core.example"), origin)
      assert.deepStrictEqual(yield* parseCoreUrl("https://core.example/"), origin)
      assert.deepStrictEqual(yield* parseCoreUrl("https://core.example/api/v1"), origin)
      assert.deepStrictEqual(yield* parseCoreUrl(" https://core.example/api/v1/ "), origin)
      assert.deepStrictEqual(yield* parseCoreUrl("http://127.0.0.1:8080/core/api/v1"), {
        origin: "http://127.0.0.1:8080/core",
        apiBase: "http://127.0.0.1:8080/core/api/v1"
      })
    }))

  it.effect("rejects other schemes, credentials, a query, a fragment and other paths", () =>
    Effect.gen(function* () {
      const problem = (text: string) => Effect.map(Effect.flip(parseCoreUrl(text)), (e) => e.problem)
      assert.strictEqual(yield* problem("ftp://core.example"), "the scheme must be http or https")
      assert.strictEqual(
        yield* problem("https://op:hunter2@core.example"),
        "credentials in the URL are not allowed (use the credential file)"
      )
      assert.strictEqual(yield* problem("https://core.example/api/v1?token=x"), "a query is not allowed")
      assert.strictEqual(yield* problem("https://core.example/api/v1?"), "a query is not allowed")
      assert.strictEqual(yield* problem("https://core.example/#x"), "a fragment is not allowed")
      assert.strictEqual(
        yield* problem("https://core.example/api/v2"),
        "expected the Core origin or the machine API base ending in /api/v1"
      )
      assert.strictEqual(yield* problem("core.example"), "not an absolute URL")
      const error = yield* Effect.flip(parseCoreUrl("https://op:hunter2@core.example"))
      assert.notInclude(error.message, "hunter2")
    }))
})

describe("RuntimeConfig.parseDeviceId / parseCredential / parseCapabilityList", () => {
  it.effect("a device id is trimmed, non-empty, bounded and free of whitespace", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* parseDeviceId(" dev-1 "), "dev-1")
      assert.strictEqual((yield* Effect.flip(parseDeviceId("  "))).problem, "must not be empty")
      assert.strictEqual((yield* Effect.flip(parseDeviceId("a b"))).problem, "must not contain whitespace or control characters")
      assert.strictEqual((yield* Effect.flip(parseDeviceId("x".repeat(129)))).problem, "longer than 128 bytes")
    }))

  it.effect("removes exactly one trailing newline from a credential and rejects empty or whitespace", () =>
    Effect.gen(function* () {
      assert.strictEqual(Redacted.value(yield* parseCredential(`${SECRET}\n`, "file")), SECRET)
      assert.strictEqual(Redacted.value(yield* parseCredential(`${SECRET}\r\n`, "file")), SECRET)
      assert.strictEqual(Redacted.value(yield* parseCredential(SECRET, "file")), SECRET)
      const twice = yield* Effect.flip(parseCredential(`${SECRET}\n\n`, "file"))
      assert.deepStrictEqual(
        twice,
        new DaemonConfigInvalid({ setting: "file", problem: "the credential contains whitespace or control characters" })
      )
      assert.notInclude(twice.message, SECRET)
      assert.strictEqual((yield* Effect.flip(parseCredential("\n", "file"))).problem, "the credential is empty")
      assert.strictEqual((yield* Effect.flip(parseCredential("", "file"))).problem, "the credential is empty")
      assert.notInclude((yield* Effect.flip(parseCredential(` ${SECRET}`, "file"))).message, SECRET)
    }))

  it("keeps the credential redacted when printed or serialized", () => {
    const credential = Redacted.make(SECRET)
    assert.notInclude(String(credential), SECRET)
    assert.notInclude(JSON.stringify({ credential }), SECRET)
  })

  it.effect("parses a capability list and names unknown capabilities", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* parseCapabilityList(" steering, permissions ,steering"), ["steering", "permissions"])
      const error = yield* Effect.flip(parseCapabilityList("steering,teleport"))
      assert.include(error.problem, "unknown capability \"teleport\"")
    }))
})

describe("RuntimeConfig.parseHarnessKinds", () => {
  it.effect("splits commas, keeps order, collapses duplicates and defaults to scripted", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* RuntimeConfig.parseHarnessKinds([]), ["scripted"])
      assert.deepStrictEqual(yield* RuntimeConfig.parseHarnessKinds([" , "]), ["scripted"])
      assert.deepStrictEqual(yield* RuntimeConfig.parseHarnessKinds(["scripted", " scripted,scripted "]), ["scripted"])
      assert.deepStrictEqual((yield* resolve({ harness: ["scripted"] })).harnessKinds, ["scripted"])
    }))

  it.effect("refuses an unknown kind, naming --harness / AGENTWIRE_HARNESS and the known kinds", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(resolve({ harness: ["scripted,nope"] }))
      assert.deepStrictEqual(
        error,
        new DaemonConfigInvalid({ setting: "--harness / AGENTWIRE_HARNESS", problem: `unknown harness kind "nope" (known: scripted, codex, claude_code)` })
      )
    }))
})

describe("RuntimeConfig.resolve", () => {
  it.effect("builds the config with defaults: profile ~/.agentwire, 4 active, 16 idle, 10 minutes, text logs", () =>
    Effect.gen(function* () {
      const config = yield* resolve({})
      assert.deepStrictEqual({ ...config, credential: Redacted.value(config.credential) }, {
        core: { origin: "https://core.example", apiBase: "https://core.example/api/v1" },
        deviceId: "7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11",
        credential: SECRET,
        profileDir: "/home/op/.agentwire",
        socketPath: "/home/op/.agentwire/agentwire.sock",
        maxActive: 4,
        maxIdleExecutors: 16,
        idleExecutorTtl: Duration.minutes(10),
        logLevel: Option.none(),
        logFormat: "text",
        scripted: { disabledCapabilities: [], available: true },
        harnessKinds: ["scripted"],
        codex: { path: undefined, config: [] },
        claudeCodePath: Option.none(),
        environment: undefined
      } as never)
    }))

  it.effect("expands ~ in the profile and resolves it to an absolute path", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* resolve({ profile: Option.some("~/state") })).profileDir, "/home/op/state")
      assert.strictEqual((yield* resolve({ profile: Option.some("/srv/aw") })).socketPath, "/srv/aw/agentwire.sock")
      assert.isTrue((yield* resolve({ profile: Option.some("rel/dir") })).profileDir.startsWith("/"))
      const long = yield* Effect.flip(resolve({ profile: Option.some(`/${"p".repeat(120)}`) }))
      assert.include(long.problem, "choose a shorter profile directory")
    }))

  it.effect("reads the credential file, which wins over AGENTWIRE_CREDENTIAL", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      const file = `${dir}/credential`
      yield* fs.writeFileString(file, "cred-FROM-FILE\n")
      const config = yield* resolve({ credentialFile: Option.some(file) })
      assert.strictEqual(Redacted.value(config.credential), "cred-FROM-FILE")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("explains an unreadable, empty or oversized credential file without its content", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      const missing = yield* Effect.flip(resolve({ credentialFile: Option.some(`${dir}/nope`) }))
      assert.deepStrictEqual(
        missing,
        new DaemonConfigInvalid({ setting: `credential file "${dir}/nope"`, problem: "cannot be read (NotFound)" })
      )
      yield* fs.writeFileString(`${dir}/empty`, "\n")
      assert.strictEqual(
        (yield* Effect.flip(resolve({ credentialFile: Option.some(`${dir}/empty`) }))).problem,
        "the credential is empty"
      )
      yield* fs.writeFileString(`${dir}/big`, SECRET.repeat(2000))
      const big = yield* Effect.flip(resolve({ credentialFile: Option.some(`${dir}/big`) }))
      assert.strictEqual(big.problem, "larger than 16384 bytes")
      assert.notInclude(big.message, SECRET)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("names the flag and the variable of a missing setting", () =>
    Effect.gen(function* () {
      assert.strictEqual(
        (yield* Effect.flip(resolve({ coreUrl: Option.none() }))).message,
        "invalid configuration: --core-url / AGENTWIRE_CORE_URL: missing: pass --core-url URL or set AGENTWIRE_CORE_URL"
      )
      assert.strictEqual(
        (yield* Effect.flip(resolve({ deviceId: Option.none() }))).message,
        "invalid configuration: --device-id / AGENTWIRE_DEVICE_ID: missing: pass --device-id ID or set AGENTWIRE_DEVICE_ID"
      )
      assert.strictEqual(
        (yield* Effect.flip(resolve({ credential: Option.none() }))).message,
        "invalid configuration: credential: missing: pass --credential-file PATH, or set AGENTWIRE_CREDENTIAL_FILE or AGENTWIRE_CREDENTIAL"
      )
    }))

  it.effect("validates capacity bounds and the scripted narrowing", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* Effect.flip(resolve({ maxActive: Option.some(0) }))).problem, "must be an integer >= 1")
      assert.strictEqual(
        (yield* Effect.flip(resolve({ maxIdleExecutors: Option.some(-1) }))).problem,
        "must be an integer >= 0"
      )
      assert.strictEqual(
        (yield* Effect.flip(resolve({ idleExecutorTtl: Option.some(Duration.zero) }))).problem,
        "must be a positive duration"
      )
      const narrowed = yield* resolve({ scriptedDisable: Option.some("steering"), scriptedUnavailable: true })
      assert.deepStrictEqual(narrowed.scripted, { disabledCapabilities: ["steering"], available: false })
    }))
})
