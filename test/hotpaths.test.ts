/**
 * The modules a one-delta Turn runs through make no generator function per call on their hot paths
 * (docs/performance.md, "generators"): calling a generator function made just now (`(a) => Effect.gen(function* ()
 * { … })`) leaves what it closes over alive through V8's young collections until the next full one, so every
 * Turn's state was copied twice and promoted. Their generator functions are made once (`Effect.fnUntraced` at
 * module or service level, taking what they use as arguments). The arrow-made generators left in these modules
 * run on rare paths (steering, cancellation, tool calls, failures, shutdown); this test keeps their number from
 * growing: a new one on a hot path belongs in an `Effect.fnUntraced` made once.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")

/** An arrow function whose body is a fresh `Effect.gen` generator (also under `Effect.scoped` / `uninterruptible`). */
const ARROW_GEN = /=>\s*(?:Effect\.(?:scoped|uninterruptible)\()?Effect\.gen\(function\*/g

const arrowGens = (text: string) => (text.match(ARROW_GEN) ?? []).length

/** Each hot module and the arrow-made generators it keeps on rare paths. */
const budget: ReadonlyArray<readonly [string, number]> = [
  ["src/core/DeliveryDriver.ts", 0],
  ["src/core/DeliveryTurn.ts", 2], // steer, cancel
  ["src/core/JournalBarrier.ts", 0],
  ["src/core/Subscriber.ts", 0],
  ["src/core/dev/GroupCommit.ts", 2], // the closing finalizer, the failed batch's retries
  ["src/core/dev/JournalCommit.ts", 1], // fence probes (several nodes)
  ["src/core/dev/LiveBuffer.ts", 0],
  ["src/core/dev/OperatorApi.ts", 2],
  ["src/core/dev/OperatorSse.ts", 1],
  ["src/core/dev/TurnFacts.ts", 3],
  ["src/core/dev/TurnJournal.ts", 0],
  ["src/core/dev/TurnRunner.ts", 2], // a device offline, a lease lost
  ["src/core/dev/TurnSettle.ts", 0],
  ["src/core/dev/Turns.ts", 1],
  ["src/runtime/Admission.ts", 4],
  ["src/runtime/Executors.ts", 4],
  ["src/runtime/Runs.ts", 2], // a refused start, a Run's stop
  ["src/runtime/Steering.ts", 4],
  ["src/runtime/harness/scripted/ScriptedBody.ts", 0],
  ["src/runtime/harness/scripted/ScriptedHarness.ts", 3],
  ["src/runtime/harness/scripted/ScriptedTurn.ts", 6], // the script's rarer steps
  ["src/runtime/harness/scripted/ScriptedTurnState.ts", 1]
]

describe("hot paths make no generator function per call", () => {
  it("counts an arrow-made generator (negative control: the check can fail)", () => {
    assert.strictEqual(arrowGens("const f = (a: A) =>\n  Effect.gen(function* () {\n    yield* a\n  })"), 1)
    assert.strictEqual(arrowGens("const f = (a: A) => Effect.scoped(Effect.gen(function* () {}))"), 1)
    assert.strictEqual(arrowGens("const f = Effect.fnUntraced(function* (a: A) {\n  yield* a\n})"), 0)
  })

  for (const [file, allowed] of budget) {
    it(`${file}: at most ${allowed}`, () => {
      const found = arrowGens(readFileSync(join(root, file), "utf8"))
      assert.isAtMost(found, allowed, `${file} makes ${found} generator functions per call (budget ${allowed}); make new ones once with Effect.fnUntraced (docs/performance.md, "generators")`)
    })
  }
})
