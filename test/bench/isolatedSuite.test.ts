/**
 * The bench's isolated suites (bench/support/isolatedSuite.ts): the workspace suite runs in a child process of its
 * own unless `BENCH_ISOLATE=0`, other suites in the bench process; the child's side of the protocol forwards every
 * progress line, then the suite's figures and notes, and turns a failure or an unknown suite into an error message.
 */
import { assert, describe, it } from "@effect/vitest"
import { figure } from "../../bench/lib/figures.js"
import type { Suite } from "../../bench/lib/suite.js"
import { runsIsolated, serveSuite } from "../../bench/support/isolatedSuite.js"

const fake = (name: string, run: Suite["run"]): Suite => ({ name, describe: name, run })

describe("bench isolated suites", () => {
  it("the workspace suite runs in a child process unless BENCH_ISOLATE=0; the others in the bench process", () => {
    assert.isTrue(runsIsolated("workspace", {}))
    assert.isFalse(runsIsolated("workspace", { BENCH_ISOLATE: "0" }))
    assert.isFalse(runsIsolated("scale", {}))
    assert.isFalse(runsIsolated("relay", {}))
  })

  it("the child forwards the suite's log lines, then its figures and notes, with the context it was asked for", async () => {
    const sent: Array<unknown> = []
    const f = figure({ suite: "workspace", name: "x", unit: "MB", samples: [1, Number.NaN] })
    const suite = fake("workspace", async (ctx) => {
      ctx.log(`quick ${ctx.quick}, root ${ctx.root}, self ${ctx.self}`)
      return { figures: [f], notes: ["n"] }
    })
    await serveSuite([suite], { name: "workspace", quick: true, root: "/r" }, "/b.mjs", (m) => sent.push(m))
    assert.deepStrictEqual(sent, [
      { op: "log", line: "quick true, root /r, self /b.mjs" },
      { op: "result", figures: [f], notes: ["n"] }
    ])
  })

  it("a failing suite and an unknown one answer with an error", async () => {
    const sent: Array<{ op: string; message?: string }> = []
    const failing = fake("workspace", () => Promise.reject(new Error("boom")))
    await serveSuite([failing], { name: "workspace", quick: false, root: "/r" }, "/b.mjs", (m) => sent.push(m as { op: string }))
    await serveSuite([failing], { name: "nope", quick: false, root: "/r" }, "/b.mjs", (m) => sent.push(m as { op: string }))
    assert.deepStrictEqual(sent.map((m) => m.op), ["error", "error"])
    assert.include(sent[0]!.message, "boom")
    assert.strictEqual(sent[1]!.message, "unknown suite nope")
  })
})
