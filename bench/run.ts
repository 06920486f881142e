/**
 * `npm run bench`: runs the suites one after another, prints a table and writes bench/results/latest.json (the
 * committed record; a `--quick` or `--only` run writes bench/results/partial.json, git-ignored, instead).
 * Every figure is compared with a baseline measured in the same run. Loopback only; bounded in time and count.
 *
 *   node dist/bench.mjs [--quick] [--only=codec,relay,durable,turns,connections,scale,coldstart,transfer,workspace,multinode] [--out=path] [--markdown] [--keep-logs]
 *
 * Child logs and cold-start profiles go to one `<tmpdir>/agentwire-bench-*` directory, removed when the run ends
 * (success, failure, SIGINT/SIGTERM) unless `--keep-logs` is given.
 *   node dist/bench.mjs --render=bench/results/latest.json   (markdown tables of a results file)
 *
 * The same bundle is also the entry of the bench's child processes (`--child=<role>`), so `npm run bench`
 * needs nothing beyond the build.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { runChild } from "./children.js"
import { type Figure, unjudged } from "./lib/figures.js"
import { describeMachine, machine } from "./lib/machine.js"
import type { Suite } from "./lib/suite.js"
import { runIsolated, runsIsolated, suiteChild } from "./support/isolatedSuite.js"
import { removeBenchTempDirOnExit, tailBenchLogs } from "./support/processes.js"
import { codecMatrix, figureRows, renderMarkdown, renderTable, summaryLine } from "./lib/table.js"
import { codecSuite } from "./suites/codec.js"
import { coldStartSuite } from "./suites/coldstart.js"
import { connectionsSuite } from "./suites/connections.js"
import { durableSuite } from "./suites/durable.js"
import { multinodeSuite } from "./suites/multinode.js"
import { relaySuite } from "./suites/relay.js"
import { scaleSuite } from "./suites/scale.js"
import { transferSuite } from "./suites/transfer.js"
import { turnsSuite } from "./suites/turns.js"
import { workspaceSuite } from "./suites/workspace.js"

const suites: ReadonlyArray<Suite> = [codecSuite, relaySuite, durableSuite, turnsSuite, connectionsSuite, scaleSuite, coldStartSuite, transferSuite, workspaceSuite, multinodeSuite]

const argValue = (name: string): string | undefined => {
  const prefix = `--${name}=`
  return process.argv.find((a) => a.startsWith(prefix))?.slice(prefix.length)
}
const flag = (name: string): boolean => process.argv.includes(`--${name}`)

const main = async () => {
  const child = argValue("child")
  // A suite in a child process of its own (support/isolatedSuite.ts: the workspace suite).
  if (child === "suite") return suiteChild(suites, fileURLToPath(import.meta.url))
  if (child !== undefined) return runChild(child, process.argv.slice(2))
  const render = argValue("render")
  if (render !== undefined) return renderResults(render)

  const self = fileURLToPath(import.meta.url)
  const root = resolve(dirname(self), "..")
  const quick = flag("quick")
  const only = argValue("only")?.split(",")
  const selected = only === undefined ? suites : suites.filter((s) => only.includes(s.name))
  if (only !== undefined && selected.length !== only.length) {
    throw new Error(`unknown suite in --only (known: ${suites.map((s) => s.name).join(", ")})`)
  }
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`)
  // The run's temporary directory goes when the process ends (also on failure or a signal), unless --keep-logs.
  removeBenchTempDirOnExit(flag("keep-logs"), log)
  const startMachine = machine()
  const startedAt = new Date()
  log(`${describeMachine(startMachine)}${quick ? " (quick)" : ""}`)

  const figures: Array<Figure> = []
  const notes: Array<string> = []
  const timings: Record<string, number> = {}
  for (const suite of selected) {
    const t0 = performance.now()
    log(`suite ${suite.name}: ${suite.describe}`)
    if (process.env["BENCH_SUITE_DIAG"] === "1") await suiteDiag(suite.name, log)
    const ctx = { quick, root, self, log }
    const result = runsIsolated(suite.name, process.env) ? await runIsolated(suite, ctx) : await suite.run(ctx)
    // A quick run is a smoke run: its targets are shown, never judged (no pass, no miss).
    figures.push(...(quick ? result.figures.map(unjudged) : result.figures))
    notes.push(...result.notes)
    timings[suite.name] = Math.round(performance.now() - t0)
  }
  const endMachine = machine()
  const rows = figureRows(figures)
  process.stdout.write(`\nmachine: ${describeMachine(startMachine)}; load at end ${endMachine.loadAverage.join(" / ")}\n\n`)
  process.stdout.write(`${flag("markdown") ? renderMarkdown(rows) : renderTable(rows)}\n\n`)
  for (const note of notes) process.stdout.write(`- ${note}\n`)

  // The committed record (latest.json) is only ever a full run of every suite; a quick or partial run goes beside it.
  const whole = !quick && only === undefined
  const out = argValue("out") ?? join(root, "bench", "results", whole ? "latest.json" : "partial.json")
  mkdirSync(dirname(out), { recursive: true })
  writeFileSync(
    out,
    JSON.stringify(
      {
        startedAt: startedAt.toISOString(),
        durationMs: Math.round(Date.now() - startedAt.getTime()),
        mode: quick ? "quick" : "full",
        machine: { ...startMachine, loadAverageAtEnd: endMachine.loadAverage },
        suites: timings,
        figures,
        notes
      },
      null,
      2
    ) + "\n"
  )
  process.stdout.write(`\nwrote ${out}; ${figures.length} figures, ${summaryLine(figures, quick)}\n`)
  // A full run that misses a target fails (exit 1) after writing its results; a quick run judges nothing.
  if (!quick && figures.some((f) => f.meets === false)) process.exitCode = 1
}

/** BENCH_SUITE_DIAG=1: what an earlier suite left alive when a suite starts (handles, heap, idle CPU over 1 s). */
const suiteDiag = async (name: string, log: (line: string) => void) => {
  const kinds: Record<string, number> = {}
  for (const k of process.getActiveResourcesInfo()) kinds[k] = (kinds[k] ?? 0) + 1
  const heap = process.memoryUsage()
  const cpu0 = process.cpuUsage()
  await new Promise((r) => setTimeout(r, 1000))
  const cpu = process.cpuUsage(cpu0)
  log(
    `diag before ${name}: resources ${JSON.stringify(kinds)}; heapUsed ${(heap.heapUsed / 2 ** 20).toFixed(1)} MiB, ` +
      `rss ${(heap.rss / 2 ** 20).toFixed(1)} MiB; idle CPU ${((cpu.user + cpu.system) / 1000).toFixed(1)} ms over 1 s`
  )
}

/** `--render=<results.json>`: prints a results file as markdown (the README's tables), without measuring. */
const renderResults = (path: string) => {
  const results = JSON.parse(readFileSync(path, "utf8")) as {
    readonly startedAt: string
    readonly machine: ReturnType<typeof machine> & { readonly loadAverageAtEnd: ReadonlyArray<number> }
    readonly figures: ReadonlyArray<Figure>
  }
  const m = results.machine
  process.stdout.write(
    `Measured ${results.startedAt.slice(0, 10)} on ${describeMachine(m)} (load at end ${m.loadAverageAtEnd.join(" / ")}).\n\n`
  )
  process.stdout.write(`${renderMarkdown(codecMatrix(results.figures))}\n\n`)
  process.stdout.write(`${renderMarkdown(figureRows(results.figures.filter((f) => f.suite !== "codec")))}\n`)
}

main().catch((error: unknown) => {
  process.stderr.write(`[bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  // The logs named above are removed at exit unless --keep-logs: show the end of each one first.
  if (!flag("keep-logs")) {
    for (const { file, tail } of tailBenchLogs()) process.stderr.write(`[bench] end of ${file}:\n${tail}\n`)
    process.stderr.write(`[bench] (rerun with --keep-logs to keep the full logs)\n`)
  }
  process.exitCode = 1
})
