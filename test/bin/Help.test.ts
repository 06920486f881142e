/**
 * Every command's help, in process over the binary's own command tree (src/bin/Root.ts): it has examples and
 * marks its required flags. The real binary's help and usage errors are checked end to end in
 * test/e2e/cli-help.live.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Console, Effect } from "effect"
import { invoke } from "../../src/bin/Root.js"

/** Runs one invocation with stdout and stderr captured. */
const run = (argv: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const out: Array<string> = []
    const err: Array<string> = []
    const capture: Console.Console = {
      ...globalThis.console,
      log: (...args) => void out.push(args.join(" ")),
      info: (...args) => void out.push(args.join(" ")),
      error: (...args) => void err.push(args.join(" ")),
      warn: (...args) => void err.push(args.join(" "))
    }
    const exit = yield* Effect.exit(Effect.provideService(invoke(argv), Console.Console, capture))
    return { exit, stdout: out.join("\n"), stderr: err.join("\n") }
  })

const paths = [
  [], ["daemon"], ["status"], ["core"], ["core", "credential"], ["core", "credential", "create"], ["core", "credential", "revoke"],
  ["demo"], ["conformance"], ["conformance", "runtime"], ["conformance", "core"], ["devices"], ["devices", "list"], ["devices", "show"],
  ["sessions"], ["sessions", "list"], ["sessions", "show"], ["sessions", "create"], ["turns"], ["turns", "list"], ["turns", "show"],
  ["turn"], ["turn", "start"], ["turn", "steer"], ["turn", "cancel"], ["turn", "answer"], ["turn", "watch"], ["help"],
  ["files"], ["files", "list"], ["files", "read"], ["files", "write"], ["files", "export"]
]

describe("agentwire help (in process)", () => {
  it.effect("every command's help has examples, and the required flags are marked", () =>
    Effect.gen(function* () {
      for (const path of paths) {
        const help = yield* run(["help", ...path])
        assert.isTrue(help.exit._tag === "Success", `agentwire help ${path.join(" ")}: ${help.stderr}`)
        assert.match(help.stdout, /\nEXAMPLES\n(?: {2}#.*\n)? {2}agentwire /, `agentwire help ${path.join(" ")}`)
      }
      const daemon = yield* run(["help", "daemon"])
      for (const flag of ["core-url", "device-id", "credential-file"]) assert.match(daemon.stdout, new RegExp(`--${flag}\\s.*\\(required`))
      assert.match(daemon.stdout, /--config string/)
      const conformance = yield* run(["help", "conformance", "core"])
      assert.match(conformance.stdout, /--url\s.*\(required\)/)
    }))

  it.effect("an unknown flag is reported on stderr with a suggestion, nothing on stdout", () =>
    Effect.gen(function* () {
      const bad = yield* run(["core", "--prot", "7400"])
      assert.isTrue(bad.exit._tag === "Failure")
      assert.strictEqual(bad.stdout, "")
      assert.strictEqual(bad.stderr.split("\n")[0], "agentwire core: unrecognized flag --prot (did you mean --port?); see agentwire help core")
    }))
})
