/**
 * Import rules (developers' guide, style guide §1 and §3): src/proto imports only effect; src/runtime and
 * src/core never import each other; scenarios import only proto and effect; unstable Effect modules, ws and
 * platform-node stay in the transport, server, control, dev, conformance and bin folders; only src/bin
 * touches process-level state. Issue #12's layering: src has no import cycle, Core's device transport
 * (src/core/transport) sits below the session and the gateway, the HTTP entry points (src/core/server) above
 * them, and no file in src exceeds 400 lines.
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")

const listTs = (dir: string): Array<string> => {
  const abs = join(root, dir)
  const out: Array<string> = []
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name)
      if (statSync(p).isDirectory()) walk(p)
      else if (p.endsWith(".ts")) out.push(p)
    }
  }
  try {
    walk(abs)
  } catch {
    return []
  }
  return out
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g

interface Edge {
  readonly file: string // repository-relative
  readonly spec: string // the import specifier as written
  readonly target: string // repository-relative resolved path for relative imports, else the package name
}

const edgesOf = (file: string): Array<Edge> => {
  const text = readFileSync(file, "utf8")
  const edges: Array<Edge> = []
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2]!
    const target = spec.startsWith(".") ? relative(root, resolve(dirname(file), spec)) : spec
    edges.push({ file: relative(root, file), spec, target })
  }
  return edges
}

const allEdges = (dir: string) => listTs(dir).flatMap(edgesOf)

/** The relative-import graph of the files of `dir`. */
const graphOf = (dir: string): ReadonlyMap<string, ReadonlyArray<string>> => {
  const graph = new Map<string, Array<string>>()
  for (const e of allEdges(dir)) {
    const targets = graph.get(e.file) ?? []
    if (!isPackage(e)) targets.push(e.target.replace(/\.js$/, ".ts"))
    graph.set(e.file, targets)
  }
  return graph
}

/** Import cycles of a graph, each as the path that closes it. */
const cyclesOf = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<string> => {
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const cycles: Array<string> = []
  // Iterative depth-first search (no recursion over the graph).
  for (const start of graph.keys()) {
    if (state.has(start)) continue
    const work: Array<{ node: string; next: number }> = [{ node: start, next: 0 }]
    state.set(start, "open")
    stack.push(start)
    while (work.length > 0) {
      const top = work[work.length - 1]!
      const targets = graph.get(top.node) ?? []
      if (top.next < targets.length) {
        const target = targets[top.next++]!
        if (!graph.has(target)) continue
        if (state.get(target) === "open") cycles.push([...stack.slice(stack.indexOf(target)), target].join(" -> "))
        else if (!state.has(target)) {
          state.set(target, "open")
          stack.push(target)
          work.push({ node: target, next: 0 })
        }
      } else {
        state.set(top.node, "done")
        stack.pop()
        work.pop()
      }
    }
  }
  return cycles
}
const isPackage = (e: Edge) => !e.spec.startsWith(".")

/** Edges of src/core/transport files that leave the transport for another Core module (Errors.ts is allowed). */
const transportUpward = (edges: ReadonlyArray<Edge>) =>
  edges.filter((e) =>
    !isPackage(e) && !inDir(e.target, "src/core/transport") && !inDir(e.target, "src/proto") &&
    e.target !== "src/core/Errors.js"
  )
const inDir = (path: string, dir: string) => path === dir || path.startsWith(dir + "/")
const isEffect = (spec: string) => spec === "effect" || spec.startsWith("effect/")

const UNSTABLE = (spec: string) =>
  spec === "effect/socket" || spec === "effect/http" || spec === "effect/rpc" || spec.startsWith("@effect/platform-node") ||
  spec === "ws" || spec.startsWith("effect/sql") || spec.startsWith("@effect/sql-pg")

const UNSTABLE_ALLOWED = [
  "src/runtime/transport",
  "src/runtime/control",
  "src/core/transport",
  "src/core/server",
  "src/core/dev",
  "src/conformance",
  "src/bin"
]

describe("architecture", () => {
  it("finds the source files it checks", () => {
    assert.isAbove(listTs("src/proto").length, 10)
  })

  it("src/proto imports only effect", () => {
    const bad = allEdges("src/proto").filter((e) =>
      isPackage(e) ? !isEffect(e.spec) : !inDir(e.target, "src/proto")
    )
    assert.deepStrictEqual(bad, [])
  })

  it("src/runtime never imports src/core, and src/core never imports src/runtime", () => {
    const runtimeToCore = allEdges("src/runtime").filter((e) => inDir(e.target, "src/core"))
    const coreToRuntime = allEdges("src/core").filter((e) => inDir(e.target, "src/runtime"))
    assert.deepStrictEqual([...runtimeToCore, ...coreToRuntime], [])
  })

  it("src/runtime and src/core import no test, bench, conformance or scenario code", () => {
    const bad = [...allEdges("src/runtime"), ...allEdges("src/core")].filter((e) =>
      ["test", "bench", "scenarios", "src/conformance", "src/bin"].some((d) => inDir(e.target, d))
    )
    assert.deepStrictEqual(bad, [])
  })

  it("scenarios import only src/proto and effect", () => {
    const bad = allEdges("scenarios").filter((e) =>
      isPackage(e) ? !isEffect(e.spec) || UNSTABLE(e.spec) : !(inDir(e.target, "scenarios") || inDir(e.target, "src/proto"))
    )
    assert.deepStrictEqual(bad, [])
  })

  it("the conformance kit imports neither the daemon nor the gateway", () => {
    const bad = allEdges("src/conformance").filter((e) => inDir(e.target, "src/runtime") || inDir(e.target, "src/core"))
    assert.deepStrictEqual(bad, [])
  })

  it("unstable modules (socket, http, rpc, sql, platform-node, ws) stay in transport, control, dev, conformance and bin", () => {
    const bad = allEdges("src").filter(
      (e) => isPackage(e) && UNSTABLE(e.spec) && !UNSTABLE_ALLOWED.some((d) => inDir(e.file, d))
    )
    assert.deepStrictEqual(bad, [])
  })

  it("only src/bin calls runMain or reads process.env, process.argv or process.exit", () => {
    const offenders = listTs("src")
      .filter((f) => !inDir(relative(root, f), "src/bin"))
      .filter((f) => /\brunMain\(|process\.(env|argv|exit)\b/.test(readFileSync(f, "utf8")))
      .map((f) => relative(root, f))
    assert.deepStrictEqual(offenders, [])
  })

  it("src has no import cycles (type-only imports included)", () => {
    assert.isAbove(graphOf("src").size, 150)
    assert.deepStrictEqual(cyclesOf(graphOf("src")), [])
  })

  it("the device transport sits below the session: src/core/transport imports no Core module above it", () => {
    // The transport contract and its internals know only their own folder, the wire contract and the
    // connection-level errors; never the session (DeviceSession, Session*), the gateway, the HTTP server
    // entry points (src/core/server) or the dev Core above them.
    assert.deepStrictEqual(transportUpward(allEdges("src/core/transport")), [])
    // The session takes the contract from the transport folder.
    const sessionEdges = edgesOf(join(root, "src/core/DeviceSession.ts")).map((e) => e.target)
    assert.include(sessionEdges, "src/core/transport/DeviceTransport.js")
  })

  it("the HTTP server entry points sit above the gateway: only they, the dev Core and the package index import src/core/server", () => {
    const bad = allEdges("src/core").filter((e) =>
      inDir(e.target, "src/core/server") && !inDir(e.file, "src/core/server") && !inDir(e.file, "src/core/dev") &&
      e.file !== "src/core/index.ts"
    )
    assert.deepStrictEqual(bad, [])
    const devUsers = allEdges("src/core").filter((e) => inDir(e.target, "src/core/dev") && !inDir(e.file, "src/core/dev"))
    assert.deepStrictEqual(devUsers, [])
  })

  it("every file in src stays under 400 lines", () => {
    const long = listTs("src")
      .map((f) => ({ file: relative(root, f), lines: readFileSync(f, "utf8").split("\n").length }))
      .filter((f) => f.lines > 400)
    assert.deepStrictEqual(long, [])
  })

  it("detects a forbidden edge when one exists (the rule itself can fail)", () => {
    const fake: Edge = { file: "src/runtime/X.ts", spec: "../core/Gateway.js", target: "src/core/Gateway.js" }
    assert.isTrue(inDir(fake.target, "src/core"))
    assert.isFalse(isEffect("ws"))
    assert.isTrue(UNSTABLE("effect/socket"))
    // The cycle check finds a cycle when one is there, and none in a chain.
    assert.deepStrictEqual(cyclesOf(new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", ["a.ts"]]])), ["a.ts -> b.ts -> c.ts -> a.ts"])
    assert.deepStrictEqual(cyclesOf(new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", []]])), [])
    // The transport rule flags an upward import and lets the contract's own imports through.
    const upward: Edge = { file: "src/core/transport/X.ts", spec: "../DeviceSession.js", target: "src/core/DeviceSession.js" }
    const errors: Edge = { file: "src/core/transport/X.ts", spec: "../Errors.js", target: "src/core/Errors.js" }
    const own: Edge = { file: "src/core/transport/X.ts", spec: "./DeviceTransport.js", target: "src/core/transport/DeviceTransport.js" }
    assert.deepStrictEqual(transportUpward([upward, errors, own]), [upward])
  })
})
