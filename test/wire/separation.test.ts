/**
 * The two runners are independent: the Runtime side's files never import Core's gateway and the Core side's
 * never import the daemon (the design document: "neither imports the other"). The kit itself imports neither
 * (test/architecture.test.ts); this checks the test side.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { resolve } from "node:path"

const root = resolve(import.meta.dirname, "../..")
const imports = (file: string): Array<string> =>
  [...readFileSync(resolve(root, file), "utf8").matchAll(/from\s+["']([^"']+)["']/g)].map((m) => m[1]!)

describe("wire runners", () => {
  it("the Runtime side imports the daemon and never the gateway", () => {
    const specs = [...imports("test/wire/runtime.wire.test.ts"), ...imports("test/support/wireRuntimeRunner.ts")]
    assert.isTrue(specs.some((s) => s.includes("/src/runtime/")))
    assert.deepStrictEqual(specs.filter((s) => s.includes("/src/core/") || s.includes("wireCoreRunner")), [])
  })

  it("the suite shape both sides share imports neither side", () => {
    const specs = imports("test/support/wireSuite.ts")
    assert.deepStrictEqual(specs.filter((s) => /\/src\/(core|runtime)\/|wire(Core|Runtime)Runner/.test(s)), [])
  })

  it("the Core side imports the gateway and never the daemon", () => {
    const specs = [...imports("test/wire/core.wire.test.ts"), ...imports("test/support/wireCoreRunner.ts")]
    assert.isTrue(specs.some((s) => s.includes("/src/core/")))
    assert.deepStrictEqual(specs.filter((s) => s.includes("/src/runtime/") || s.includes("wireRuntimeRunner")), [])
  })
})
