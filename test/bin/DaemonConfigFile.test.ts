/**
 * `agentwire daemon --config FILE` (src/bin/DaemonConfigFile.ts): both file formats, the precedence rule
 * (the command line wins), secrets and unknown keys refused without echoing a value, and the key table kept
 * in step with the daemon's flags. The end-to-end run of the binary with a file is in
 * test/e2e/daemon-config.live.test.ts.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  configArgs,
  DaemonConfigKeys,
  expandDaemonConfig,
  flagsOnCommandLine,
  MaxConfigBytes,
  parseConfigText
} from "../../src/bin/DaemonConfigFile.js"
import { daemonFlags } from "../../src/bin/commands/daemon.js"

const failureText = <R>(effect: Effect.Effect<unknown, { readonly text: string }, R>) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(effect)
    assert.isTrue(Exit.isFailure(exit))
    return Exit.isFailure(exit) ? String((exit.cause as any).reasons?.[0]?.error?.text ?? JSON.stringify(exit.cause)) : ""
  })

describe("daemon config file", () => {
  it.effect("parses key = value lines (comments, quotes, repeated list keys) and JSON the same way", () =>
    Effect.gen(function* () {
      const lines = yield* parseConfigText([
        "# the laptop",
        "core-url = https://core.example",
        "device-id = \"laptop 1\"",
        "",
        "harness = scripted",
        "harness = codex",
        "max-active = 2",
        "idle-executor-ttl = 10m",
        "scripted-unavailable = false"
      ].join("\n"))
      const json = yield* parseConfigText(JSON.stringify({
        "core-url": "https://core.example",
        "device-id": "laptop 1",
        harness: ["scripted", "codex"],
        "max-active": 2,
        "idle-executor-ttl": "10m",
        "scripted-unavailable": false
      }))
      assert.deepStrictEqual(lines, json)
      assert.deepStrictEqual(configArgs(lines, new Set()), [
        "--core-url=https://core.example",
        "--device-id=laptop 1",
        "--harness=scripted",
        "--harness=codex",
        "--max-active=2",
        "--idle-executor-ttl=10m"
      ])
    }))

  it("lets the command line win: a key set there is not taken from the file (a repeatable one entirely)", () => {
    const entries = [["core-url", "https://file"], ["harness", "scripted"], ["harness", "codex"], ["scripted-unavailable", true]] as const
    const commandLine = flagsOnCommandLine(["--core-url=https://flag", "--harness", "claude_code"])
    assert.deepStrictEqual(configArgs(entries, commandLine), ["--scripted-unavailable"])
  })

  it.effect("refuses a secret key and an unknown key, naming the key and never the value", () =>
    Effect.gen(function* () {
      const secret = yield* failureText(parseConfigText("credential = awdc_supersecret"))
      assert.include(secret, "credential (line 1) would hold a secret")
      assert.notInclude(secret, "supersecret")
      const token = yield* failureText(parseConfigText(JSON.stringify({ "operator-token": "awop_x1" })))
      assert.include(token, "would hold a secret")
      assert.notInclude(token, "awop_x1")
      const unknown = yield* failureText(parseConfigText("bogus = awdc_value"))
      assert.include(unknown, "unknown key bogus (line 1)")
      assert.notInclude(unknown, "awdc_value")
      const malformed = yield* failureText(parseConfigText("core-url https://x"))
      assert.include(malformed, "line 1 is not key = value")
      const typed = yield* failureText(parseConfigText(JSON.stringify({ "max-active": "two" })))
      assert.include(typed, "max-active must be an integer")
      const twice = yield* failureText(parseConfigText("profile = a\nprofile = b"))
      assert.include(twice, "profile is set twice (line 2)")
    }))

  it("has a key for every daemon flag, and nothing else", () => {
    // Every flag but --config itself, plus the global --log-level.
    const expected = Object.keys(daemonFlags)
      .filter((k) => k !== "config")
      .map((k) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`))
      .concat(["log-level"])
      .sort()
    assert.deepStrictEqual(Object.keys(DaemonConfigKeys).sort(), expected)
  })

  it.effect("expands the daemon's arguments from a file; leaves other commands and --help alone; bounds the size", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-config-"))
      try {
        const file = join(dir, "daemon.conf")
        writeFileSync(file, "core-url = https://file\nprofile = /p\n")
        const args = yield* expandDaemonConfig(["daemon", "--config", file, "--profile", "/flag"])
        assert.deepStrictEqual(args, ["daemon", "--core-url=https://file", "--config", file, "--profile", "/flag"])
        assert.deepStrictEqual(yield* expandDaemonConfig(["core", "--config", file]), ["core", "--config", file])
        assert.deepStrictEqual(yield* expandDaemonConfig(["daemon", "--config", file, "--help"]), ["daemon", "--config", file, "--help"])
        const missing = yield* failureText(expandDaemonConfig(["daemon", `--config=${join(dir, "nope")}`]))
        assert.include(missing, "cannot read")
        const big = join(dir, "big.conf")
        writeFileSync(big, "# " + "x".repeat(MaxConfigBytes))
        assert.include(yield* failureText(expandDaemonConfig(["daemon", "--config", big])), "larger than 64 KiB")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
