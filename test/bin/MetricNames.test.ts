/**
 * Issue #22: docs/observability.md lists exactly the metrics the code defines, with the same types. Every
 * `agentwire_…` metric exported by CoreMetrics, RuntimeMetrics and the dev Core's TurnTelemetry, and the
 * event-loop gauges, must have a row in the Core or daemon table, and every row must name one of them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Metric } from "effect"
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import * as CoreMetrics from "../../src/core/CoreMetrics.js"
import * as TurnTelemetry from "../../src/core/dev/TurnTelemetry.js"
import * as RuntimeMetrics from "../../src/runtime/RuntimeMetrics.js"

const docs = readFileSync(resolve(import.meta.dirname, "../../docs/observability.md"), "utf8")

/** name → type of every Metric a module exports. */
const defined = (module: Record<string, unknown>): Map<string, string> =>
  new Map(Object.values(module).filter(Metric.isMetric).map((m) => [m.id, m.type]))

/** name → type of every row of the metric tables (first cell: one or more backticked names; second: type). */
const documented = (): Map<string, string> => {
  const rows = new Map<string, string>()
  for (const line of docs.split("\n")) {
    const cells = line.split("|").map((c) => c.trim())
    if (cells.length < 4 || !cells[1]!.startsWith("`agentwire_")) continue
    for (const [, name] of cells[1]!.matchAll(/`(agentwire_[a-z_]+)`/g)) rows.set(name!, cells[2]!)
  }
  return rows
}

describe("docs/observability.md metric tables", () => {
  it("name every metric the code defines, with its type, and nothing else", () => {
    const code = new Map([
      ...defined(CoreMetrics),
      ...defined(TurnTelemetry),
      ...defined(RuntimeMetrics),
      ["agentwire_core_event_loop_delay_seconds", "Gauge"],
      ["agentwire_daemon_event_loop_delay_seconds", "Gauge"]
    ])
    assert.isAbove(code.size, 25)
    const rows = documented()
    assert.deepStrictEqual([...rows.keys()].sort(), [...code.keys()].sort())
    for (const [name, type] of code) assert.strictEqual(rows.get(name), type.toLowerCase(), name)
  })
})
