/**
 * Suites that run in a fresh child process of their own (`--child=suite`) instead of the bench process
 * (docs/performance.md, "wsorder"). The workspace suite measures its contenders (Core's drivers with the in-process
 * daemon, raw `ws`) by the CPU time of the process they run in, so that process's V8 heap state is part of every
 * reading: run after the scale suite (ten minutes of a nearly idle orchestrator: the young generation shrunk, then
 * regrown to its largest, 128 MiB, over a live heap of ~23 MB), every young-generation collection of the bench process
 * became a mark-compact, 10-26 per transfer, and all three contenders cost about twice the CPU per byte of a run alone.
 * A fresh process gives every run the heap state of `--only=workspace`, whatever ran before.
 *
 * Protocol (IPC, `advanced` serialization so NaN samples survive): the parent sends `{op: "run", name, quick, root}`;
 * the child answers `{op: "log", line}` per progress line and `{op: "result", figures, notes}` at the end (a failure
 * is `{op: "error", message}`), then exits when asked (`{op: "exit"}`) or when the parent goes away.
 * `BENCH_ISOLATE=0` runs every suite in the bench process as before (for paired comparisons).
 */
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { op, spawnChild } from "./processes.js"

/** Suites run in a child process of their own. */
export const IsolatedSuites: ReadonlySet<string> = new Set(["workspace"])

/** Whether `name` runs in a child process under this environment. */
export const runsIsolated = (name: string, env: Readonly<Record<string, string | undefined>>): boolean =>
  IsolatedSuites.has(name) && env["BENCH_ISOLATE"] !== "0"

/** The child's answer to one `run` message: the named suite's log lines, then its result (or an error). */
export const serveSuite = async (
  suites: ReadonlyArray<Suite>,
  message: { readonly name: string; readonly quick: boolean; readonly root: string },
  self: string,
  send: (message: unknown) => void
): Promise<void> => {
  const suite = suites.find((s) => s.name === message.name)
  if (suite === undefined) return send({ op: "error", message: `unknown suite ${message.name}` })
  try {
    const result = await suite.run({ quick: message.quick, root: message.root, self, log: (line) => send({ op: "log", line }) })
    send({ op: "result", figures: result.figures, notes: result.notes })
  } catch (error) {
    send({ op: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) })
  }
}

/** `--child=suite`: serves `run` messages until told to exit or the parent goes away. */
export const suiteChild = async (suites: ReadonlyArray<Suite>, self: string): Promise<void> => {
  const send = (message: unknown) => process.send?.(message as object)
  process.on("message", (message: unknown) => {
    if (op("exit")(message)) process.exit(0)
    if (op("run")(message)) void serveSuite(suites, message as unknown as { name: string; quick: boolean; root: string }, self, send)
  })
  process.on("disconnect", () => process.exit(0))
  await new Promise<never>(() => {})
}

/** Runs `suite` in a fresh child process of the bench bundle; its progress lines go to `ctx.log`. */
export const runIsolated = async (suite: Suite, ctx: SuiteContext): Promise<SuiteResult> => {
  const child = spawnChild(ctx.self, "suite", { serialization: "advanced" })
  const forward = (message: unknown) => {
    if (op("log")(message)) ctx.log(message["line"] as string)
  }
  child.process.on("message", forward)
  try {
    ctx.log(`${suite.name}: in a child process of its own (pid ${child.process.pid}; BENCH_ISOLATE=0 runs it in this one)`)
    child.send({ op: "run", name: suite.name, quick: ctx.quick, root: ctx.root })
    const result = await child.next(op("result"), 60 * 60_000)
    return { figures: result["figures"] as SuiteResult["figures"], notes: result["notes"] as SuiteResult["notes"] }
  } finally {
    await child.stop()
    child.process.off("message", forward)
  }
}
