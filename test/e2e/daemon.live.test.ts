/**
 * End to end: the bundled binary (dist/agentwire.mjs, built by the vitest globalSetup) runs as a child process
 * against the scripted fake Core over real loopback HTTP and WebSocket. Real time passes here (reconnect
 * backoff of 500 ms and 750 ms), so these are live tests.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, type Scope } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { FakeCore, reply, type SeenRequest } from "../support/runtimeFakeCore.js"

const binary = Path.resolve(import.meta.dirname, "../../dist/agentwire.mjs")

interface Child {
  readonly exitCode: Effect.Effect<number>
  readonly output: () => string
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
}

/** Runs the binary; the child is killed when the scope closes if it is still running. */
const runBinary = (args: ReadonlyArray<string>, env: Record<string, string>): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.gen(function* () {
    const exited = yield* Deferred.make<number>()
    const chunks: Array<string> = []
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const proc = spawn(process.execPath, [binary, ...args], {
          env: { PATH: process.env["PATH"] ?? "", HOME: Os.tmpdir(), ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
        proc.stdout.on("data", (d: Buffer) => chunks.push(d.toString("utf8")))
        proc.stderr.on("data", (d: Buffer) => chunks.push(d.toString("utf8")))
        proc.on("exit", (code, signal) => Deferred.doneUnsafe(exited, Exit.succeed(code ?? (signal === null ? -1 : 128))))
        return proc
      }),
      (proc) => Effect.sync(() => proc.exitCode === null && proc.signalCode === null && proc.kill("SIGKILL"))
    )
    return {
      // Bounded so a hung daemon fails the test with its output instead of a bare timeout.
      exitCode: Deferred.await(exited).pipe(
        Effect.timeoutOrElse({
          duration: "20 seconds",
          orElse: () => Effect.die(new Error(`agentwire ${args[0]} did not exit; output:\n${chunks.join("")}`))
        })
      ),
      output: () => chunks.join(""),
      signal: (signal) => Effect.sync(() => void child.kill(signal))
    }
  })

const tempProfile = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "aw-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const daemonArgs = (core: { readonly origin: string }, profile: string, extra: ReadonlyArray<string> = []) => [
  "daemon",
  "--core-url",
  core.origin,
  "--device-id",
  "dev-e2e",
  "--profile",
  profile,
  ...extra
]

/** The credential appears only as the exact Authorization header of each request. */
const assertOnlyInAuthorization = (requests: ReadonlyArray<SeenRequest>, credential: string) => {
  assert.isAbove(requests.length, 0)
  for (const r of requests) {
    assert.strictEqual(r.headers["authorization"], `Bearer ${credential}`, `${r.route} ${r.method}`)
    assert.notInclude(r.url, credential)
    assert.notInclude(r.body, credential)
    for (const [name, value] of Object.entries(r.headers)) {
      if (name !== "authorization") assert.notInclude(String(value), credential, `header ${name}`)
    }
  }
}

describe("agentwire daemon (bundled binary)", () => {
  for (const format of ["text", "json"] as const) {
    it.live(`never writes the credential anywhere but the Authorization header (${format} logs)`, () =>
      Effect.gen(function* () {
        const credential = `cred-REDACTION-${format}-c0ffee`
        const core = yield* FakeCore.make
        const profile = yield* tempProfile
        yield* core.scriptBootstrap(reply.bootstrapError(500, "internal"), { _tag: "default" })
        const source = format === "text"
          ? (() => {
            Fs.writeFileSync(Path.join(profile, "credential"), `${credential}\n`, { mode: 0o600 })
            return { args: ["--credential-file", Path.join(profile, "credential")], env: {} }
          })()
          : { args: [], env: { AGENTWIRE_CREDENTIAL: credential } }
        const child = yield* runBinary(
          daemonArgs(core, profile, [...source.args, "--log-format", format, "--log-level", "debug"]),
          source.env
        )
        const conn = yield* core.nextConnection
        // Core echoes the credential back inside frames: neither a valid-looking nor an invalid frame may leak it.
        yield* conn.send(JSON.stringify({ type: "prompt_cancel", id: "run-x", payload: { secret: credential } }))
        yield* conn.send(`not json ${credential}`)
        yield* core.scriptBootstrap(reply.bootstrapError(401, "bad_credential", `credential ${credential} rejected`))
        yield* conn.close(1011, "server restart")
        assert.strictEqual(yield* child.exitCode, 3, child.output())
        const output = child.output()
        assert.include(output, "unauthorized (bad_credential)")
        assert.include(output, "connecting to Core failed")
        assert.notInclude(output, credential)
        assert.notInclude(output, credential.slice(5)) // not even a fragment of it
        if (format === "json") {
          // Every line is one flat JSON object, the fatal one too: no plain-text ERROR block at the end (#20).
          const lines = output.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Record<string, unknown>)
          const last = lines[lines.length - 1]!
          assert.deepStrictEqual([last.level, last.exit_code], ["FATAL", 3])
          assert.include(String(last.msg), "unauthorized (bad_credential)")
          assert.notProperty(last, "annotations")
        }
        const requests = yield* core.requests
        assert.deepStrictEqual(requests.map((r) => r.route), ["bootstrap", "bootstrap", "upgrade", "bootstrap"])
        assertOnlyInAuthorization(requests, credential)
      }))
  }

  it.live("a version mismatch (426) stops with the operator message, exit code 3 and no reconnect", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const profile = yield* tempProfile
      yield* core.scriptBootstrap({ _tag: "default", protocol_version: "0.11.0" })
      yield* core.scriptUpgrade(
        reply.upgradeError(426, "incompatible_version", "daemon protocol 0.10.0 incompatible with server 0.11.0")
      )
      const child = yield* runBinary(daemonArgs(core, profile), { AGENTWIRE_CREDENTIAL: "cred-426" })
      assert.strictEqual(yield* child.exitCode, 3, child.output())
      assert.include(
        child.output(),
        "incompatible_version: this daemon speaks wire 0.10.0, Core speaks 0.11.0 (HTTP 426) — deploy matching versions of the daemon and Core; not reconnecting"
      )
      assert.deepStrictEqual((yield* core.requests).map((r) => r.route), ["bootstrap", "upgrade"])
      assert.isFalse(Fs.existsSync(Path.join(profile, "agentwire.sock")))
    }))

  it.live("close code 4001 (runtime retired) stops with exit code 3", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const profile = yield* tempProfile
      const child = yield* runBinary(daemonArgs(core, profile), { AGENTWIRE_CREDENTIAL: "cred-4001" })
      const conn = yield* core.nextConnection
      yield* conn.close(4001, "runtime retired")
      assert.strictEqual(yield* child.exitCode, 3, child.output())
      assert.include(child.output(), "runtime_retired")
      assert.deepStrictEqual((yield* core.requests).map((r) => r.route), ["bootstrap", "upgrade"])
    }))

  it.live("connects with device_id and version, answers `agentwire status`, and exits 0 on SIGTERM with a 1000 close", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const profile = yield* tempProfile
      const child = yield* runBinary(daemonArgs(core, profile), { AGENTWIRE_CREDENTIAL: "cred-status" })
      const conn = yield* core.nextConnection
      assert.strictEqual(conn.url, "/api/v1/agent-daemon/ws?device_id=dev-e2e&version=0.10.0")
      assert.strictEqual(conn.headers["user-agent"], "agentwire/0.1.0")
      let snapshot: { connection: { state: string; connection_number: number } } | undefined
      for (let i = 0; i < 50 && snapshot?.connection.state !== "connected"; i++) {
        const status = yield* runBinary(["status", "--profile", profile, "--json"], {})
        assert.strictEqual(yield* status.exitCode, 0, status.output())
        snapshot = JSON.parse(status.output())
        if (snapshot?.connection.state !== "connected") yield* Effect.sleep("50 millis")
      }
      assert.strictEqual(snapshot?.connection.state, "connected")
      assert.strictEqual(snapshot?.connection.connection_number, 1, JSON.stringify(snapshot))
      const human = yield* runBinary(["status"], { AGENTWIRE_PROFILE: profile })
      assert.strictEqual(yield* human.exitCode, 0, human.output())
      assert.include(human.output(), "connection: connected (#1)")
      const closed = yield* Effect.forkChild(conn.closed)
      yield* child.signal("SIGTERM")
      assert.strictEqual(yield* child.exitCode, 0, child.output())
      assert.deepStrictEqual(yield* Fiber.join(closed), { code: 1000, reason: "client closing" })
      assert.isFalse(Fs.existsSync(Path.join(profile, "agentwire.sock")))
      const after = yield* runBinary(["status", "--profile", profile], {})
      assert.strictEqual(yield* after.exitCode, 1, after.output())
      assert.include(after.output(), "no agentwire daemon is running for this profile")
    }))

  it.live("a second daemon on the same profile refuses to start (exit code 2)", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const profile = yield* tempProfile
      const first = yield* runBinary(daemonArgs(core, profile), { AGENTWIRE_CREDENTIAL: "cred-one" })
      yield* core.nextConnection
      const second = yield* runBinary(daemonArgs(core, profile), { AGENTWIRE_CREDENTIAL: "cred-two" })
      assert.strictEqual(yield* second.exitCode, 2, second.output())
      assert.include(second.output(), "another agentwire daemon is running with this profile")
      yield* first.signal("SIGTERM")
      assert.strictEqual(yield* first.exitCode, 0, first.output())
    }))

  it.live("sends a heartbeat at once after connecting, declaring the scripted kind", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const profile = yield* tempProfile
      yield* runBinary(daemonArgs(core, profile), { AGENTWIRE_CREDENTIAL: "cred-hb" })
      const conn = yield* core.nextConnection
      const first = yield* conn.received
      assert.strictEqual(first.type, "heartbeat")
      if (first.type !== "heartbeat") return
      const scripted = first.payload.supported_agent_kinds?.find((k) => k.kind === "scripted")
      assert.isDefined(scripted)
      assert.isTrue(scripted?.available)
      assert.strictEqual(first.payload.daemon_version, "0.1.0")
    }))

  it.live("--scripted-unavailable and --scripted-disable narrow the declared kind", () =>
    Effect.gen(function* () {
      const core = yield* FakeCore.make
      const profile = yield* tempProfile
      yield* runBinary(daemonArgs(core, profile, ["--scripted-unavailable", "--scripted-disable", "steering,permissions"]), {
        AGENTWIRE_CREDENTIAL: "cred-narrow"
      })
      const conn = yield* core.nextConnection
      const first = yield* conn.received
      if (first.type !== "heartbeat") return assert.fail(`expected a heartbeat, got ${first.type}`)
      const scripted = first.payload.supported_agent_kinds?.find((k) => k.kind === "scripted")
      assert.isFalse(scripted?.available)
      assert.isFalse(scripted?.capabilities.steering)
      assert.isFalse(scripted?.capabilities.permissions)
      assert.isTrue(scripted?.capabilities.streaming)
    }))
})
