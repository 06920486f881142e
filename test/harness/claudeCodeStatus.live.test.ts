/**
 * `agentwire status` shows the `claude_code` kind, its version and its availability (issue #15, "Done when"):
 * the real daemon binary (`dist/agentwire.mjs daemon --harness claude_code`, built by the vitest globalSetup)
 * with the pinned Claude Code, against the scripted fake Core. With a key the kind is available at 2.1.332
 * (status and the first heartbeat agree); without one it is unavailable and status names the reason, which
 * never reaches the wire. The key appears in no status output.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, type Scope } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { FakeCore } from "../support/runtimeFakeCore.js"

const binary = Path.resolve(import.meta.dirname, "../../dist/agentwire.mjs")
const secretKey = "sk-ant-status-secret-7d31"

/** Runs the binary; killed when the Scope closes if still running. */
const runBinary = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.gen(function* () {
    const exited = yield* Deferred.make<number>()
    const chunks: Array<string> = []
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const proc = spawn(process.execPath, [binary, ...args], {
          env: { PATH: process.env["PATH"] ?? "", HOME: Os.tmpdir(), ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
        proc.stdout.on("data", (d: Buffer) => chunks.push(d.toString("utf8")))
        proc.stderr.on("data", (d: Buffer) => chunks.push(d.toString("utf8")))
        proc.on("exit", (code) => Deferred.doneUnsafe(exited, Exit.succeed(code ?? -1)))
        return proc
      }),
      (proc) => Effect.sync(() => proc.exitCode === null && proc.signalCode === null && proc.kill("SIGTERM"))
    )
    return {
      exitCode: Deferred.await(exited).pipe(
        Effect.timeoutOrElse({ duration: "30 seconds", orElse: () => Effect.die(new Error(`no exit: ${chunks.join("")}`)) })
      ),
      output: () => chunks.join("")
    }
  })

const tempProfile = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "aw-cc-status-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Starts a daemon with the claude_code kind and returns its first heartbeat's claude_code entry and its status. */
const daemonWith = (env: Record<string, string>): Effect.Effect<{
  readonly declared: { readonly available: boolean; readonly version?: string | undefined } | undefined
  readonly heartbeat: string
  readonly human: string
  readonly json: string
}, never, Scope.Scope> =>
  Effect.gen(function* () {
    const core = yield* FakeCore.make
    const profile = yield* tempProfile
    yield* runBinary(
      ["daemon", "--core-url", core.origin, "--device-id", "dev-cc-status", "--profile", profile, "--harness", "claude_code"],
      { AGENTWIRE_CREDENTIAL: "cred-cc-status", ...env }
    )
    const conn = yield* core.nextConnection
    const first = yield* conn.received
    if (first.type !== "heartbeat") return yield* Effect.die(new Error(`expected a heartbeat, got ${first.type}`))
    const human = yield* runBinary(["status", "--profile", profile], {})
    assert.strictEqual(yield* human.exitCode, 0, human.output())
    const json = yield* runBinary(["status", "--profile", profile, "--json"], {})
    assert.strictEqual(yield* json.exitCode, 0, json.output())
    return {
      declared: first.payload.supported_agent_kinds?.find((k) => k.kind === "claude_code"),
      heartbeat: JSON.stringify(first),
      human: human.output(),
      json: json.output()
    }
  })

describe("agentwire status with the claude_code kind (real daemon binary, real Claude Code)", () => {
  it.live("with a key: the kind, version 2.1.332 and available, in status and in the heartbeat", () =>
    Effect.gen(function* () {
      const seen = yield* daemonWith({ ANTHROPIC_API_KEY: secretKey, ANTHROPIC_BASE_URL: "http://127.0.0.1:9" })
      assert.match(seen.human, /^ {2}claude_code 2\.1\.332: available, \d+ capabilities supported$/m)
      const kind = (JSON.parse(seen.json) as { kinds: ReadonlyArray<{ kind: string; available: boolean; version?: string }> })
        .kinds.find((k) => k.kind === "claude_code")
      assert.deepInclude(kind, { kind: "claude_code", available: true, version: "2.1.332" })
      assert.deepInclude(seen.declared, { available: true, version: "2.1.332" })
      for (const text of [seen.human, seen.json, seen.heartbeat]) assert.notInclude(text, secretKey)
    }), 90_000)

  it.live("without a key: unavailable, and status names the reason (never sent on the wire)", () =>
    Effect.gen(function* () {
      const seen = yield* daemonWith({})
      assert.include(
        seen.human,
        "  claude_code 2.1.332: unavailable (no model key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN in the daemon's environment)"
      )
      assert.deepInclude(seen.declared, { available: false, version: "2.1.332" })
      assert.notInclude(seen.heartbeat, "no model key")
    }), 90_000)
})
