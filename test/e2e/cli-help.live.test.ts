/**
 * Help and usage errors of the real binary: an unknown flag is one line on stderr with a hint (and a suggestion
 * when one is close), nothing on stdout, exit 2; `agentwire help CMD` prints that command's help; required flags
 * are marked; durations take the short forms. Every command's help is checked in process over the same command
 * tree (test/bin/Help.test.ts), which spares the 35 start-ups of the binary.
 */
import { assert, describe, it } from "@effect/vitest"
import { runToEnd } from "../support/devcoreLive.js"

describe("agentwire help and usage errors (end to end)", () => {
  it("reports an unknown flag as one line on stderr with a hint and a suggestion, exit 2, nothing on stdout", async () => {
    const result = await runToEnd(["core", "--prot", "7400"])
    assert.strictEqual(result.code, 2)
    assert.strictEqual(result.stdout, "")
    const lines = result.stderr.trimEnd().split("\n")
    assert.strictEqual(lines[0], "agentwire core: unrecognized flag --prot (did you mean --port?); see agentwire help core")
    const missing = await runToEnd(["turn", "start"])
    assert.strictEqual(missing.code, 2)
    assert.strictEqual(missing.stdout, "")
    assert.strictEqual(missing.stderr, "agentwire turn start: missing required flag: --session; see agentwire help turn start\n")
  })

  it("agentwire help CMD prints that command's help (with examples and required flags marked), exit 0", async () => {
    const result = await runToEnd(["help", "turn", "start"])
    assert.strictEqual(result.code, 0, result.stderr)
    assert.match(result.stdout, /Start a Turn in a Session/)
    assert.match(result.stdout, /--session\s.*\(required\)/)
    assert.match(result.stdout, /agentwire turn start --session session-1 --text "hello" --watch/)
    const root = await runToEnd(["help"])
    assert.strictEqual(root.code, 0)
    assert.match(root.stdout, /SUBCOMMANDS/)
    assert.match(root.stdout, /help\s/)
  })

  it("refuses a bare-number duration in one line (90s and 10m parse: test/bin/Durations.test.ts)", async () => {
    const bad = await runToEnd(["conformance", "runtime", "--connect-timeout", "90"])
    assert.strictEqual(bad.code, 2)
    assert.strictEqual(bad.stdout, "")
    assert.match(bad.stderr, /^agentwire conformance runtime: .*--connect-timeout.*; see agentwire help conformance runtime\n$/)
  })
})
