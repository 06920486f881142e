/**
 * Verdicts of a scenario replay and the two report formats of the conformance kit: a table a person reads
 * (scenario, verdict, first divergent frame) and JSON (`--json`). A divergence names the step, what was
 * expected and what arrived, rendered short and redacted (Match.render): a report never carries a credential
 * or an unbounded peer payload.
 */
import { Data } from "effect"
import type { Side } from "../../scenarios/WireScenario.js"

/** The first place the real implementation departed from the scenario. */
export interface Divergence {
  /** 1-based index of the step in the scenario's full step list. */
  readonly step: number
  readonly stepKind: string
  readonly reason: string
  readonly expected?: string
  readonly actual?: string
  /** The divergent frame's type, id and size, when a frame diverged. */
  readonly frame?: { readonly type?: string; readonly id?: string; readonly bytes?: number }
}

/** A replay failed at a step; carried in the error channel of the replay engine. */
export class ScenarioDiverged extends Data.TaggedError("ScenarioDiverged")<{ readonly divergence: Divergence }> {}

export type Verdict =
  | { readonly _tag: "Pass"; readonly framesChecked: number; readonly skippedChecks: number }
  | { readonly _tag: "Fail"; readonly divergence: Divergence }
  | { readonly _tag: "Skip"; readonly reason: string }

export interface ScenarioResult {
  readonly scenario: string
  /** The implementation under test. */
  readonly side: Side
  readonly verdict: Verdict
}

export interface Report {
  readonly side: Side
  readonly results: ReadonlyArray<ScenarioResult>
}

export const summary = (report: Report) => ({
  passed: report.results.filter((r) => r.verdict._tag === "Pass").length,
  failed: report.results.filter((r) => r.verdict._tag === "Fail").length,
  skipped: report.results.filter((r) => r.verdict._tag === "Skip").length
})

const verdictText = (v: Verdict): string => (v._tag === "Pass" ? "pass" : v._tag === "Fail" ? "FAIL" : "skip")

const detailText = (v: Verdict): string => {
  switch (v._tag) {
    case "Pass":
      return `${v.framesChecked} frames checked${v.skippedChecks > 0 ? `, ${v.skippedChecks} side checks not observable here` : ""}`
    case "Skip":
      return v.reason
    case "Fail": {
      const d = v.divergence
      const frame = d.frame === undefined
        ? ""
        : ` [${d.frame.type ?? "?"}${d.frame.id === undefined ? "" : ` id=${d.frame.id}`}${d.frame.bytes === undefined ? "" : ` ${d.frame.bytes} B`}]`
      const diff = d.expected === undefined && d.actual === undefined
        ? ""
        : `; expected ${d.expected ?? "-"}; got ${d.actual ?? "-"}`
      return `step ${d.step} (${d.stepKind}): ${d.reason}${frame}${diff}`
    }
  }
}

/** A plain-text table: one line per scenario, then a `N passed, N failed, N skipped` line. */
export const formatTable = (report: Report): string => {
  const nameWidth = Math.max(8, ...report.results.map((r) => r.scenario.length))
  const lines = [
    `${"scenario".padEnd(nameWidth)}  verdict  first divergent frame / note`,
    `${"-".repeat(nameWidth)}  -------  ----------------------------`
  ]
  for (const r of report.results) {
    lines.push(`${r.scenario.padEnd(nameWidth)}  ${verdictText(r.verdict).padEnd(7)}  ${detailText(r.verdict)}`)
  }
  const s = summary(report)
  lines.push("", `${s.passed} passed, ${s.failed} failed, ${s.skipped} skipped (${report.side} under test)`)
  return lines.join("\n")
}

/** The JSON report (`--json`). */
export const formatJson = (report: Report): string =>
  JSON.stringify({ side: report.side, summary: summary(report), results: report.results }, null, 2)
