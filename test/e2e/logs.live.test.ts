/**
 * The operator log lines of both sides, from a real `agentwire core` and a real daemon at debug level in JSON:
 * connection lines on both sides share one `connection_id`; the daemon logs its declared kinds, the
 * admission, the Run's start and finish with a duration, frames at debug on both sides (type, id, size, never a payload);
 * Core logs a refused operator request (401) without the token, the Turn's cancel with what it proved, and
 * both log a shutdown reason naming the signal. No line of either side holds the operator token, the daemon
 * credential, or a Turn's input text.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { createCredential, eventually, operator, type Proc, run, runToEnd, script, stopAll, tempDir } from "../support/devcoreLive.js"

let dir: string
let core: Proc & { url?: string }
let daemon: Proc
let url: string
let token: string
let credential: string

const lines = (proc: Proc) =>
  proc.stderr.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Record<string, unknown>)
const find = (proc: Proc, msg: string) => lines(proc).filter((l) => l.msg === msg)

beforeAll(async () => {
  dir = tempDir("agentwire-logs-")
  core = run(["core", "--port", "0", "--data-dir", dir, "--heartbeat-seconds", "1", "--log-format", "json", "--log-level", "debug"])
  url = await eventually(() => (core.stdout.includes("\n") ? core.stdout.split("\n")[0] : undefined), 20_000, "core url")
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  const created = await createCredential(dir, "dev-log")
  credential = created.credential
  daemon = run([
    "daemon", "--core-url", url, "--device-id", "dev-log", "--credential-file", created.file, "--profile", join(dir, "profile"),
    "--log-format", "json", "--log-level", "debug"
  ])
  await eventually(async () => ((await operator(url, token).get("/devices/dev-log")).body?.online === true ? true : undefined), 25_000, "online")
}, 60_000)

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

describe("operator log lines of both sides (end to end)", () => {
  it("logs a Turn's life, a 401 and a cancellation on both sides with one connection id, and never a secret", async () => {
    const api = operator(url, token)
    assert.strictEqual((await fetch(`${url}/api/v1/operator/devices`, { headers: { authorization: "Bearer awop_wrong-token" } })).status, 401)
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    const secretText = "private-input-text-4711"
    const turn = await api.post(`/sessions/${session.body.session_id}/turns`, { input: script([{ delta: secretText }, { await_steer: 1 }]) })
    const turnId = turn.body.turn_id as string
    // The Run has started (and emitted its delta) before the cancel: prompt_cancel, not an abandoned admission.
    await eventually(() => (find(daemon, "run started").length > 0 && find(daemon, "frame sent").some((f) => f.type === "delta") ? true : undefined), 20_000, "run started")
    const cancelled = await api.post(`/turns/${turnId}/cancel`)
    assert.strictEqual(cancelled.body.status, "cancelled")
    await eventually(() => (find(daemon, "run finished").length > 0 && find(core, "turn finished").length > 0 ? true : undefined), 20_000, "finished lines").catch((e) => {
      throw new Error(`${e.message}: daemon ${lines(daemon).map((l) => l.msg).join("; ")} core ${lines(core).map((l) => l.msg).join("; ")}`)
    })

    // One connection id on both sides.
    const daemonConnected = find(daemon, "connected to Core")[0]!
    const coreConnected = find(core, "runtime connected")[0]!
    assert.match(String(daemonConnected.connection_id), /^c-[0-9a-f]{12}$/)
    assert.strictEqual(coreConnected.connection_id, daemonConnected.connection_id)

    // The daemon: declared kinds, admission, Run start and finish with a duration, frames at debug.
    assert.strictEqual(find(daemon, "declared kinds")[0]!.kinds, "scripted")
    assert.isAbove(find(daemon, "admission admitted (ready)").length, 0)
    const finished = find(daemon, "run finished")[0]!
    assert.strictEqual(finished.outcome, "cancelled")
    assert.isNumber(finished.duration_ms)
    const frames = find(daemon, "frame received")
    assert.isTrue(frames.some((f) => f.type === "execution_start" && typeof f.bytes === "number"))
    assert.isTrue(find(daemon, "frame sent").some((f) => f.type === "delta" && typeof f.bytes === "number" && f.bytes > 0))
    // Core's frames at debug too: type, id, size, device and connection number; never a payload.
    const coreSent = find(core, "frame sent").find((f) => f.type === "execution_start")!
    assert.deepStrictEqual([coreSent.device_id, typeof coreSent.id, typeof coreSent.bytes], ["dev-log", "string", "number"])
    const coreReceived = find(core, "frame received").filter((f) => f.type === "delta")
    assert.isAbove(coreReceived.length, 0)
    assert.isAbove(coreReceived[0]!.bytes as number, 0)
    assert.isNumber(coreReceived[0]!.connection)

    // Core: the 401 without the token, the Turn's cancel and finish (with its duration as turn_ms).
    const refused = find(core, "operator request unauthorized (401)")[0]!
    assert.strictEqual(refused.path, "/api/v1/operator/devices")
    assert.strictEqual(refused.bearer, "wrong")
    assert.strictEqual(find(core, "turn cancel")[0]!.status, "cancelled")
    // Core: the Turn admitted and started, with its ids.
    const accepted = find(core, "turn accepted")[0]!
    assert.deepStrictEqual([accepted.turn_id, accepted.device_id], [turnId, "dev-log"])
    assert.isString(accepted.run_id)
    assert.strictEqual(find(core, "turn delivery started")[0]!.turn_id, turnId)
    const turnFinished = find(core, "turn finished")[0]!
    assert.strictEqual(turnFinished.turn_id, turnId)
    assert.isNumber(turnFinished.turn_ms)

    // No secret and no input text in any line of either side.
    for (const text of [core.stderr + core.stdout, daemon.stderr + daemon.stdout]) {
      assert.notInclude(text, token)
      assert.notInclude(text, credential)
      assert.notInclude(text, "awop_wrong-token")
      assert.notInclude(text, secretText)
    }
  }, 90_000)

  it("with json logs, a fatal error is one flat JSON line with its exit code on both sides, even at --log-level none", async () => {
    const jsonLines = (stderr: string) => stderr.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Record<string, unknown>)
    // A second Core on the locked data directory: exit 2, and the reason as the only (JSON) line.
    const second = await runToEnd(["core", "--port", "0", "--data-dir", dir, "--log-format", "json"])
    assert.strictEqual(second.code, 2, second.stderr)
    const [coreFatal, ...coreRest] = jsonLines(second.stderr)
    assert.deepStrictEqual(coreRest, [])
    assert.deepStrictEqual([coreFatal!.level, coreFatal!.exit_code], ["FATAL", 2])
    assert.include(String(coreFatal!.msg), `another agentwire core is using the data directory ${dir}`)
    // The daemon's configuration error, with the format from the environment and every log line turned off.
    const daemonRun = run(
      ["daemon", "--core-url", url, "--device-id", "dev-log", "--credential-file", join(dir, "no-such-file"), "--log-level", "none"],
      { AGENTWIRE_LOG_FORMAT: "json" }
    )
    assert.strictEqual(await daemonRun.exited, 2, daemonRun.stderr)
    const daemonLines = jsonLines(daemonRun.stderr)
    assert.strictEqual(daemonLines.length, 1, daemonRun.stderr)
    assert.deepStrictEqual([daemonLines[0]!.level, daemonLines[0]!.exit_code], ["FATAL", 2])
    assert.include(String(daemonLines[0]!.msg), "credential file")
    // The text format keeps the CLI's rendering.
    const text = await runToEnd(["core", "--port", "0", "--data-dir", dir])
    assert.strictEqual(text.code, 2)
    assert.throws(() => JSON.parse(text.stderr.trim()))
  }, 60_000)

  it("logs the shutdown reason with the signal on both sides", async () => {
    daemon.child.kill("SIGHUP")
    assert.strictEqual(await daemon.exited, 0)
    assert.strictEqual(find(daemon, "daemon stopping")[0]!.reason, "SIGHUP")
    core.child.kill("SIGTERM")
    assert.strictEqual(await core.exited, 0)
    assert.strictEqual(find(core, "core stopping")[0]!.reason, "SIGTERM")
  }, 60_000)
})
