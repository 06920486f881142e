/**
 * `agentwire daemon --config FILE` with the real binary against a real dev Core: the daemon connects with
 * every setting from the file (key = value lines), a flag overrides the file (`--log-format`), and a file
 * holding a secret is refused in one line that does not echo it (exit 2, before anything starts).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type CoreProc, createCredential, eventually, operator, run, runToEnd, startCore, stopAll, tempDir } from "../support/devcoreLive.js"

let dir: string
let core: CoreProc
let token: string

beforeAll(async () => {
  dir = tempDir("agentwire-daemon-config-")
  core = await startCore(dir)
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
}, 60_000)

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

// Online with its capability declaration recorded (the declaration lands just after the connection is registered).
const online = (deviceId: string) =>
  eventually(async () => {
    const body = (await operator(core.url, token).get(`/devices/${deviceId}`)).body
    return body?.online === true && body.declaration != null ? body : undefined
  }, 25_000, `${deviceId} online`)

describe("agentwire daemon --config (end to end)", () => {
  it("connects with every setting from the file; a flag on the command line overrides the file", async () => {
    const { file } = await createCredential(dir, "dev-conf")
    const config = join(dir, "daemon.conf")
    writeFileSync(config, [
      "# a daemon configured by file",
      `core-url = ${core.url}`,
      "device-id = dev-conf",
      `credential-file = "${file}"`,
      `profile = ${join(dir, "profile-conf")}`,
      "harness = scripted",
      "log-format = json",
      "idle-executor-ttl = 10m"
    ].join("\n"))
    const fromFile = run(["daemon", "--config", config])
    const device = await online("dev-conf")
    await eventually(() => (fromFile.stderr.includes("\n") ? true : undefined), 10_000, "a log line")
    const first = fromFile.stderr.split("\n")[0]!
    assert.strictEqual(JSON.parse(first).msg, "agentwire daemon starting", first)
    const kinds = device.declaration.kinds.map((k: any) => k.kind)
    assert.deepStrictEqual(kinds, ["scripted"])
    fromFile.child.kill("SIGTERM")
    assert.strictEqual(await fromFile.exited, 0)

    const overridden = run(["daemon", "--config", config, "--log-format", "text"])
    await online("dev-conf")
    await eventually(() => (overridden.stderr.includes("\n") ? true : undefined), 10_000, "a log line")
    assert.throws(() => JSON.parse(overridden.stderr.split("\n")[0]!))
    assert.match(overridden.stderr, /level=INFO .*agentwire daemon starting/)
    overridden.child.kill("SIGTERM")
    assert.strictEqual(await overridden.exited, 0)
  }, 90_000)

  it("refuses a file holding a secret or an unknown key in one line, without echoing the value (exit 2)", async () => {
    const secret = join(dir, "secret.conf")
    writeFileSync(secret, `core-url = ${core.url}\ncredential = awdc_do-not-echo\n`)
    const refused = await runToEnd(["daemon", "--config", secret])
    assert.strictEqual(refused.code, 2)
    assert.strictEqual(refused.stdout, "")
    assert.strictEqual(
      refused.stderr,
      "agentwire daemon --config: credential (line 2) would hold a secret; put the credential in a file and name it with credential-file, or use the environment\n"
    )
    const unknown = join(dir, "unknown.json")
    writeFileSync(unknown, JSON.stringify({ "core-url": core.url, "max-actve": 2 }))
    const bad = await runToEnd(["daemon", "--config", unknown])
    assert.strictEqual(bad.code, 2)
    assert.match(bad.stderr, /^agentwire daemon --config: unknown key max-actve \(key "max-actve"\); the keys are the daemon's flag names without --\n$/)
    const missing = await runToEnd(["daemon", "--config", join(dir, "nope.conf")])
    assert.strictEqual(missing.code, 2)
    assert.match(missing.stderr, /cannot read .*nope\.conf/)
  }, 60_000)
})
