/**
 * Plain-text table of figures for the terminal and the README. Pure; covered by test/bench/bench.test.ts.
 */
import { describeTarget, type Figure, formatNumber, formatPercent, formatSummary, verdict } from "./figures.js"

/** Pads each column to its widest cell; the first row is the header, followed by a rule. */
export const renderTable = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  if (rows.length === 0) return ""
  const columns = Math.max(...rows.map((r) => r.length))
  const widths = Array.from({ length: columns }, (_, c) => Math.max(...rows.map((r) => displayWidth(r[c] ?? ""))))
  const line = (r: ReadonlyArray<string>) =>
    widths.map((w, c) => pad(r[c] ?? "", w)).join("  ").trimEnd()
  const [head, ...body] = rows
  return [line(head!), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n")
}

/** Markdown table (for the README): same cells, pipes escaped. */
export const renderMarkdown = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  if (rows.length === 0) return ""
  const esc = (s: string) => s.replace(/\|/g, "\\|")
  const [head, ...body] = rows
  return [
    `| ${head!.map(esc).join(" | ")} |`,
    `| ${head!.map(() => "---").join(" | ")} |`,
    ...body.map((r) => `| ${r.map(esc).join(" | ")} |`)
  ].join("\n")
}

// Code points, not UTF-16 units, so "≥" and "–" count once.
const displayWidth = (s: string): number => [...s].length
const pad = (s: string, width: number): string => s + " ".repeat(Math.max(0, width - displayWidth(s)))

export const figureHeader = ["suite", "figure", "median (min–max)", "unit", "baseline (median)", "ratio", "target", "ok"]

/** One row per figure. */
export const figureRow = (f: Figure): Array<string> => [
  f.suite,
  f.name,
  formatSummary(f.value),
  f.unit,
  f.baseline === undefined ? "" : `${f.baseline.name}: ${formatNumber(f.baseline.value.median)}`,
  f.ratio === undefined ? "" : formatSummary(f.ratio, formatPercent),
  f.target === undefined ? "" : describeTarget(f.target, f.unit),
  verdict(f)
]

/** A negative control's row under its figure: it must miss the same target. */
export const controlRow = (f: Figure): Array<string> | undefined => {
  const c = f.control
  if (c === undefined || f.target === undefined) return undefined
  return [
    "",
    `  control: ${c.name}`,
    formatSummary(c.value),
    f.unit,
    "",
    c.ratio === undefined ? "" : formatSummary(c.ratio, formatPercent),
    "must miss",
    f.judged === false ? "not judged" : c.meets ? "MET (check cannot fail)" : "missed"
  ]
}

export const figureRows = (figures: ReadonlyArray<Figure>): Array<Array<string>> => [
  figureHeader,
  ...figures.flatMap((f) => {
    const control = controlRow(f)
    return control === undefined ? [figureRow(f)] : [figureRow(f), control]
  })
]

/**
 * The codec figures as one row per frame kind (for the README): decode throughput and its ratios to
 * JSON.parse, to JSON.parse + ajv and of Schema's own decoder, and encode against JSON.stringify.
 */
export const codecMatrix = (figures: ReadonlyArray<Figure>): Array<Array<string>> => {
  const byName = new Map(figures.filter((f) => f.suite === "codec").map((f) => [f.name, f]))
  const kinds = [...byName.keys()].filter((n) => /^decode \S+$/.test(n)).map((n) => n.slice("decode ".length))
  const ratio = (name: string) => {
    const f = byName.get(name)
    return f?.ratio === undefined ? "" : formatPercent(f.ratio.median)
  }
  return [
    ["frame", "decode (frames/s)", "vs JSON.parse", "target", "vs JSON.parse+ajv", "Schema-only vs JSON.parse", "encode vs JSON.stringify"],
    ...kinds.map((kind) => {
      const decode = byName.get(`decode ${kind}`)!
      return [
        kind,
        formatNumber(decode.value.median),
        ratio(`decode ${kind}`),
        decode.target === undefined ? "" : `${describeTarget(decode.target, decode.unit)} ${verdict(decode)}`,
        ratio(`decode ${kind} vs ajv`),
        ratio(`schema-only decode ${kind}`),
        ratio(`encode ${kind}`)
      ]
    })
  ]
}

/** The run's last line: what was judged and missed; a quick run says it cannot judge targets. */
export const summaryLine = (figures: ReadonlyArray<Figure>, quick: boolean): string => {
  const targeted = figures.filter((f) => f.target !== undefined)
  if (quick) {
    return `quick run: cannot judge targets (${targeted.length} targets not judged; run without --quick to judge them)`
  }
  const missed = targeted.filter((f) => f.meets !== true).map((f) => `${f.suite}/${f.name}`)
  return missed.length === 0
    ? `all ${targeted.length} targets met (each negative control missed)`
    : `targets missed: ${missed.join(", ")}`
}
