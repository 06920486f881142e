/**
 * The bench harness's pure parts (bench/lib): statistics, target verdicts, number formatting and the table;
 * and the run's temporary directory (bench/support/processes.ts), which a run removes unless --keep-logs.
 * No timing here: the benches themselves run only in `npm run bench`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  describeTarget,
  figure,
  formatNumber,
  formatPercent,
  formatSummary,
  lastVsMiddle,
  marginalLastVsMiddle,
  meetsTarget,
  unjudged,
  unjudgedBecause,
  verdict
} from "../../bench/lib/figures.js"
import { distribution, pairedRatios, percentile, percentileSorted, summarize } from "../../bench/lib/stats.js"
import { codecMatrix, controlRow, figureRow, figureRows, renderMarkdown, renderTable, summaryLine } from "../../bench/lib/table.js"
import { requestCpuUs } from "../../bench/support/devicePage.js"
import { benchTempDir, currentBenchTempDir, removeBenchTempDir, tailBenchLogs } from "../../bench/support/processes.js"

describe("bench stats", () => {
  it("summarizes min, median and max regardless of input order", () => {
    assert.deepStrictEqual(summarize([5, 1, 3]), { n: 3, min: 1, median: 3, max: 5 })
    assert.deepStrictEqual(summarize([4, 1, 3, 2]), { n: 4, min: 1, median: 2.5, max: 4 })
    assert.deepStrictEqual(summarize([7]), { n: 1, min: 7, median: 7, max: 7 })
  })

  it("gives NaN for an empty summary instead of throwing", () => {
    const s = summarize([])
    assert.strictEqual(s.n, 0)
    assert.isNaN(s.min)
    assert.isNaN(s.median)
    assert.isNaN(s.max)
  })

  it("interpolates percentiles between closest ranks and clamps at the ends", () => {
    const sorted = [10, 20, 30, 40, 50]
    assert.strictEqual(percentileSorted(sorted, 0), 10)
    assert.strictEqual(percentileSorted(sorted, 50), 30)
    assert.strictEqual(percentileSorted(sorted, 100), 50)
    assert.strictEqual(percentileSorted(sorted, 25), 20)
    assert.strictEqual(percentileSorted(sorted, 90), 46)
    assert.strictEqual(percentile([50, 10, 40, 20, 30], 75), 40)
    assert.isNaN(percentileSorted([], 50))
  })

  it("reports p50, p90, p99 and max of a latency sample", () => {
    const values = Array.from({ length: 101 }, (_, i) => i) // 0..100
    assert.deepStrictEqual(distribution(values), { n: 101, p50: 50, p90: 90, p99: 99, max: 100 })
  })

  it("pairs ratios round by round and refuses unpaired samples", () => {
    assert.deepStrictEqual(pairedRatios([2, 9], [4, 3]), [0.5, 3])
    assert.throws(() => pairedRatios([1, 2], [1]))
  })
})

describe("bench figures", () => {
  it("builds a figure with its baseline, the paired ratio and the target verdict on the median", () => {
    const f = figure({
      suite: "codec",
      name: "decode delta",
      unit: "frames/s",
      samples: [60, 50, 40],
      baseline: { name: "JSON.parse", samples: [100, 100, 100] },
      target: { on: "ratio", op: ">=", value: 0.5 }
    })
    assert.deepStrictEqual(f.value, { n: 3, min: 40, median: 50, max: 60 })
    assert.deepStrictEqual(f.baseline, {
      name: "JSON.parse",
      value: { n: 3, min: 100, median: 100, max: 100 },
      samples: [100, 100, 100]
    })
    assert.deepStrictEqual(f.samples, [60, 50, 40])
    assert.deepStrictEqual(f.ratio, { n: 3, min: 0.4, median: 0.5, max: 0.6 })
    assert.strictEqual(f.meets, true)
  })

  it("misses a ratio target just below it and meets a value target just below its bound", () => {
    const below = figure({
      suite: "s",
      name: "n",
      unit: "u",
      samples: [49],
      baseline: { name: "b", samples: [100] },
      target: { on: "ratio", op: ">=", value: 0.5 }
    })
    assert.strictEqual(below.meets, false)
    assert.strictEqual(meetsTarget({ on: "value", op: "<", value: 1 }, summarize([0.999]), undefined), true)
    assert.strictEqual(meetsTarget({ on: "value", op: "<", value: 1 }, summarize([1]), undefined), false)
    assert.strictEqual(meetsTarget({ on: "value", op: "<=", value: 1.25 }, summarize([1.25]), undefined), true)
  })

  it("judges an every-round target on the worst round: the max below a bound, the min above one", () => {
    const below = (samples: ReadonlyArray<number>) =>
      figure({ suite: "latency", name: "p99 difference", unit: "ms", samples, target: { on: "value", op: "<", value: 1, over: "every" } })
    // The median (0.2) meets "< 1" but one round does not: an every-round target misses.
    assert.strictEqual(below([-0.2, 0.2, 3.61]).meets, false)
    assert.strictEqual(below([-0.205, 0.217, 0.952]).meets, true)
    assert.strictEqual(below([0.5, 0.999]).meets, true)
    assert.strictEqual(below([0.5, 1]).meets, false)
    // The same samples judged on the median (the default) meet.
    assert.strictEqual(meetsTarget({ on: "value", op: "<", value: 1 }, summarize([-0.2, 0.2, 3.61]), undefined), true)
    assert.strictEqual(meetsTarget({ on: "value", op: "<", value: 1, over: "median" }, summarize([-0.2, 0.2, 3.61]), undefined), true)
    // At or above a bound: the worst round is the min; on the ratio when the target is on the ratio.
    assert.strictEqual(meetsTarget({ on: "ratio", op: ">=", value: 0.6, over: "every" }, summarize([1]), summarize([0.6, 0.9])), true)
    assert.strictEqual(meetsTarget({ on: "ratio", op: ">=", value: 0.6, over: "every" }, summarize([1]), summarize([0.599, 0.9])), false)
    assert.strictEqual(meetsTarget({ on: "value", op: "<=", value: 1.25, over: "every" }, summarize([1, 1.25]), undefined), true)
    assert.strictEqual(meetsTarget({ on: "value", op: "<=", value: 1.25, over: "every" }, summarize([1, 1.26]), undefined), false)
    assert.strictEqual(meetsTarget({ on: "value", op: "<", value: 1, over: "every" }, summarize([]), undefined), false)
  })

  it("uses explicit ratios when given, and has no ratio without a paired baseline", () => {
    const explicit = figure({
      suite: "s",
      name: "n",
      unit: "ms",
      samples: [0.2],
      baseline: { name: "raw", samples: [0.1] },
      ratios: [3]
    })
    assert.deepStrictEqual(explicit.ratio, { n: 1, min: 3, median: 3, max: 3 })
    const unpaired = figure({ suite: "s", name: "n", unit: "ms", samples: [1, 2], baseline: { name: "raw", samples: [1] } })
    assert.isUndefined(unpaired.ratio)
    assert.isUndefined(unpaired.meets)
  })

  it("fails a target whose number is missing", () => {
    assert.strictEqual(meetsTarget({ on: "ratio", op: ">=", value: 0.5 }, summarize([1]), undefined), false)
    assert.strictEqual(meetsTarget({ on: "value", op: "<", value: 1 }, summarize([]), undefined), false)
  })

  it("formats numbers with three significant digits and k / M suffixes", () => {
    assert.strictEqual(formatNumber(0), "0")
    assert.strictEqual(formatNumber(0.4291), "0.429")
    assert.strictEqual(formatNumber(3.2349), "3.23")
    assert.strictEqual(formatNumber(9.996), "10")
    assert.strictEqual(formatNumber(51.25), "51.3")
    assert.strictEqual(formatNumber(707.4), "707")
    assert.strictEqual(formatNumber(9735), "9735")
    assert.strictEqual(formatNumber(52_100), "52.1k")
    assert.strictEqual(formatNumber(1_159_000), "1159k")
    assert.strictEqual(formatNumber(12_345_678), "12.3M")
    assert.strictEqual(formatNumber(Number.NaN), "n/a")
    assert.strictEqual(formatNumber(Number.POSITIVE_INFINITY), "∞")
    assert.strictEqual(formatPercent(0.529), "52.9 %")
  })

  it("shows median (min–max), or the median alone when the samples agree", () => {
    assert.strictEqual(formatSummary({ n: 3, min: 1, median: 2, max: 3 }), "2 (1–3)")
    assert.strictEqual(formatSummary({ n: 2, min: 5, median: 5, max: 5 }), "5")
    assert.strictEqual(formatSummary({ n: 3, min: 0.4, median: 0.5, max: 0.6 }, formatPercent), "50 % (40 %–60 %)")
  })

  it("describes targets in words a reader checks against the table", () => {
    assert.strictEqual(describeTarget({ on: "ratio", op: ">=", value: 0.6 }, "frames/s"), "ratio ≥ 60 %")
    assert.strictEqual(describeTarget({ on: "value", op: "<", value: 1 }, "ms"), "< 1 ms")
    assert.strictEqual(describeTarget({ on: "value", op: "<=", value: 1.25 }, "×"), "≤ 1.25 ×")
    assert.strictEqual(describeTarget({ on: "value", op: "<", value: 1, over: "every" }, "ms"), "< 1 ms every round")
    assert.strictEqual(describeTarget({ on: "ratio", op: ">=", value: 0.6, over: "median" }, "frames/s"), "ratio ≥ 60 %")
  })
})

describe("bench checks that can fail", () => {
  const relay = (control: ReadonlyArray<number>) =>
    figure({
      suite: "relay",
      name: "deltas",
      unit: "frames/s",
      samples: [60, 55, 70],
      baseline: { name: "raw ws, same batching", samples: [100, 100, 100] },
      target: { on: "ratio", op: ">=", value: 0.5 },
      control: { name: "raw ws, one write per frame", samples: control }
    })

  it("judges the negative control by the same target against the same baseline; it must miss", () => {
    const ok = relay([20, 25, 22])
    assert.strictEqual(ok.control?.meets, false)
    assert.deepStrictEqual(ok.control?.ratio, { n: 3, min: 0.2, median: 0.22, max: 0.25 })
    assert.strictEqual(ok.meets, true)
    assert.strictEqual(verdict(ok), "yes")
    assert.deepStrictEqual(controlRow(ok)?.slice(1), ["  control: raw ws, one write per frame", "22 (20–25)", "frames/s", "", "22 % (20 %–25 %)", "must miss", "missed"])
  })

  it("fails a figure whose control meets the target too (the check could not have failed)", () => {
    const broken = relay([50, 60, 51])
    assert.strictEqual(broken.control?.meets, true)
    assert.strictEqual(broken.meets, false)
    assert.strictEqual(verdict(broken), "NO (control met: check cannot fail)")
    assert.strictEqual(controlRow(broken)?.[7], "MET (check cannot fail)")
    // An every-round latency target: a control 1 ms late misses "< 1 ms" even when its median is just above.
    const latency = figure({
      suite: "latency",
      name: "p99",
      unit: "ms",
      samples: [0.3, 0.4],
      target: { on: "value", op: "<", value: 1, over: "every" },
      control: { name: "1 ms later", samples: [0.99, 1.01] }
    })
    assert.strictEqual(latency.control?.meets, false)
    assert.strictEqual(latency.meets, true)
  })

  it("a quick run's figures show the target but judge nothing, and its summary never passes", () => {
    const quick = unjudged(relay([20, 25, 22]))
    assert.isUndefined(quick.meets)
    assert.strictEqual(quick.judged, false)
    assert.strictEqual(verdict(quick), "not judged")
    assert.strictEqual(figureRow(quick)[7], "not judged")
    assert.strictEqual(controlRow(quick)?.[7], "not judged")
    const missed = figure({ suite: "s", name: "n", unit: "u", samples: [1], target: { on: "value", op: ">=", value: 2 } })
    assert.match(summaryLine([unjudged(missed)], true), /^quick run: cannot judge targets/)
    assert.notMatch(summaryLine([unjudged(missed)], true), /met/)
    assert.strictEqual(summaryLine([missed], false), "targets missed: s/n")
    assert.strictEqual(summaryLine([relay([20, 25, 22])], false), "all 1 targets met (each negative control missed)")
    // A figure without a target is unchanged.
    const plain = figure({ suite: "s", name: "n", unit: "u", samples: [1] })
    assert.strictEqual(unjudged(plain), plain)
    assert.strictEqual(verdict(plain), "")
  })

  it("a full run's figure measured without what its target assumes is not judged, says why, and is never a pass", () => {
    // A flatness quotient over a span without a whole GC cycle: 1.4 would read as a miss, 0.8 as a pass; neither is judged.
    for (const value of [1.4, 0.8]) {
      const f = figure({ suite: "scale", name: "flat", unit: "×", samples: [value], target: { on: "value", op: "<=", value: 1.25 }, note: "spans" })
      const partial = unjudgedBecause(f, "no major GC within 30 s")
      assert.strictEqual(verdict(partial), "not judged")
      assert.isUndefined(partial.meets)
      assert.strictEqual(partial.note, "spans; not judged: no major GC within 30 s")
      assert.strictEqual(summaryLine([partial], false), "targets missed: scale/flat")
    }
    const plain = figure({ suite: "s", name: "n", unit: "u", samples: [1] })
    assert.strictEqual(unjudgedBecause(plain, "x"), plain)
  })

  it("judges flat as the last level against the middle one, not the first", () => {
    // First level carries a one-time cost: against the first the last looks flat (0.6), against the middle it is not.
    assert.strictEqual(lastVsMiddle([10, 4, 6]), 1.5)
    assert.strictEqual(lastVsMiddle([10, 4, 4]), 1)
    assert.strictEqual(lastVsMiddle([3, 6]), 2)
    assert.isNaN(lastVsMiddle([1]))
    // Cumulative totals at 1k / 5k / 10k over 100 at level 0: steps of 1.0, 0.5 and 0.5 per unit.
    assert.strictEqual(marginalLastVsMiddle([1000, 5000, 10_000], [1100, 3100, 5600], 100), 1)
    // Quadratic growth: per-unit steps rise, so last vs middle exceeds a 1.25 bound.
    const quadratic = [1000, 5000, 10_000].map((n) => n * n / 1000)
    assert.isAbove(marginalLastVsMiddle([1000, 5000, 10_000], quadratic, 0), 1.25)
  })

  it("takes a request's CPU net of each thread's background rate, so a longer wait adds no heartbeat CPU", () => {
    const got = (ms: number, mainCpuUs: number, workerCpuUs: number) =>
      ({ op: "got", ms, status: 200, bytes: 0, loopMaxMs: 0, mainCpuUs, cpuUs: 0, workerCpuUs, gcCount: 0, gcMs: 0 }) as const
    const bg = { mainPerMs: 40, workerPerMs: 5 }
    // 4 ms of the route's main-thread work and 1.5 ms of statements, in 5 ms and in 20 ms of wall clock.
    assert.strictEqual(requestCpuUs(got(5, 4000 + 200, 1500 + 25), bg), 5500)
    assert.strictEqual(requestCpuUs(got(20, 4000 + 800, 1500 + 100), bg), 5500)
    // Never negative per thread; no worker reading (not Linux) counts the main thread alone.
    assert.strictEqual(requestCpuUs(got(10, 100, Number.NaN), bg), 0)
  })
})

describe("bench table", () => {
  it("pads columns to the widest cell, counting characters like ≥ and – once", () => {
    const text = renderTable([
      ["a", "bb"],
      ["ccc", "≥"]
    ])
    assert.strictEqual(text, ["a    bb", "---  --", "ccc  ≥"].join("\n"))
  })

  it("renders markdown with escaped pipes", () => {
    assert.strictEqual(renderMarkdown([["x", "y"], ["a|b", "c"]]), ["| x | y |", "| --- | --- |", "| a\\|b | c |"].join("\n"))
    assert.strictEqual(renderTable([]), "")
  })

  it("writes one row per figure with verdict, baseline and ratio", () => {
    const f = figure({
      suite: "relay",
      name: "deltas",
      unit: "frames/s",
      samples: [10_000, 12_000, 11_000],
      baseline: { name: "raw ws", samples: [50_000, 50_000, 50_000] },
      target: { on: "ratio", op: ">=", value: 0.6 }
    })
    assert.deepStrictEqual(figureRow(f), [
      "relay",
      "deltas",
      "11k (10k–12k)",
      "frames/s",
      "raw ws: 50k",
      "22 % (20 %–24 %)",
      "ratio ≥ 60 %",
      "NO"
    ])
    assert.strictEqual(figureRows([f]).length, 2)
    const worst = figure({
      suite: "latency",
      name: "added p99 (daemon p99 − raw p99), worst round",
      unit: "ms",
      samples: [-0.2, 0.2, 3.61],
      target: { on: "value", op: "<", value: 1, over: "every" }
    })
    assert.deepStrictEqual(figureRow(worst).slice(2), ["0.2 (-0.2–3.61)", "ms", "", "", "< 1 ms every round", "NO"])
    assert.deepStrictEqual(figureRow(figure({ suite: "s", name: "n", unit: "KiB", samples: [1] })).slice(4), ["", "", "", ""])
  })

  it("condenses the codec figures to one row per frame kind", () => {
    const pair = (name: string, x: number, target?: number) =>
      figure({
        suite: "codec",
        name,
        unit: "frames/s",
        samples: [x],
        baseline: { name: "b", samples: [100] },
        ...(target === undefined ? {} : { target: { on: "ratio", op: ">=", value: target } })
      })
    const rows = codecMatrix([
      pair("decode delta", 70, 0.5),
      pair("decode delta vs ajv", 80),
      pair("schema-only decode delta", 20),
      pair("encode delta", 65),
      figure({ suite: "relay", name: "decode x", unit: "u", samples: [1] })
    ])
    assert.deepStrictEqual(rows.slice(1), [["delta", "70", "70 %", "ratio ≥ 50 % yes", "80 %", "20 %", "65 %"]])
  })
})

describe("bench temporary directory", () => {
  it("is one agentwire-bench-* directory per run, and removeBenchTempDir deletes it with its logs", () => {
    removeBenchTempDir()
    assert.isUndefined(currentBenchTempDir())
    assert.deepStrictEqual(tailBenchLogs(), [])
    const dir = benchTempDir()
    try {
      assert.strictEqual(benchTempDir(), dir)
      assert.strictEqual(currentBenchTempDir(), dir)
      assert.strictEqual(Path.dirname(dir), Os.tmpdir())
      assert.match(Path.basename(dir), /^agentwire-bench-/)
      Fs.writeFileSync(Path.join(dir, "runtime-peer-1.log"), "x".repeat(5000) + "last line\n")
      Fs.writeFileSync(Path.join(dir, "load-1.log"), "")
      Fs.mkdirSync(Path.join(dir, "profile"))
      const tails = tailBenchLogs(100)
      assert.deepStrictEqual(tails.map((t) => t.file), ["runtime-peer-1.log"])
      assert.strictEqual(tails[0]!.tail.length, 100)
      assert.isTrue(tails[0]!.tail.endsWith("last line\n"))
    } finally {
      removeBenchTempDir()
    }
    assert.isFalse(Fs.existsSync(dir))
    assert.isUndefined(currentBenchTempDir())
    // The next run gets a new directory.
    const next = benchTempDir()
    removeBenchTempDir()
    assert.notStrictEqual(next, dir)
    assert.isFalse(Fs.existsSync(next))
  })
})
