/**
 * Issue #12's "done when": no import cycles in src/runtime (type-only imports included), and every file in
 * src/runtime stays under 400 lines.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const runtimeDir = resolve(import.meta.dirname, "../../src/runtime")

const listTs = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const p = join(dir, name)
    return statSync(p).isDirectory() ? listTs(p) : p.endsWith(".ts") ? [p] : []
  })

const RELATIVE_IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["'](\.[^"']+)["']/g

/** Every cycle found by a depth-first walk, as repository-relative paths. */
const cyclesOf = (files: ReadonlyArray<string>): Array<string> => {
  const graph = new Map<string, Array<string>>()
  for (const file of files) {
    const targets: Array<string> = []
    for (const match of readFileSync(file, "utf8").matchAll(RELATIVE_IMPORT)) {
      const target = resolve(dirname(file), match[1]!.replace(/\.js$/, ".ts"))
      if (existsSync(target)) targets.push(target)
    }
    graph.set(file, targets)
  }
  const state = new Map<string, "open" | "done">()
  const cycles: Array<string> = []
  const visit = (file: string, stack: Array<string>) => {
    state.set(file, "open")
    stack.push(file)
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === "open") {
        cycles.push([...stack.slice(stack.indexOf(next)), next].map((f) => relative(runtimeDir, f)).join(" -> "))
      } else if (state.get(next) === undefined) visit(next, stack)
    }
    stack.pop()
    state.set(file, "done")
  }
  for (const file of files) if (state.get(file) === undefined) visit(file, [])
  return cycles
}

describe("src/runtime structure", () => {
  const files = listTs(runtimeDir)

  it("has no import cycles (type-only imports included)", () => {
    assert.deepStrictEqual(cyclesOf(files), [])
  })

  it("keeps every file under 400 lines", () => {
    const long = files
      .map((file) => ({ file: relative(runtimeDir, file), lines: readFileSync(file, "utf8").split("\n").length }))
      .filter((f) => f.lines > 400)
    assert.deepStrictEqual(long, [])
  })
})
