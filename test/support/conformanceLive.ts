/**
 * Child processes of the bundled binary for the conformance kit's live tests: start, read output as it
 * arrives, wait for a line or the exit. Real time passes here (these helpers are for *.live.test.ts only).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Option } from "effect"
import { allScenarios } from "../../scenarios/index.js"
import { kitIneligibility } from "../../src/conformance/Replay.js"

export const binary = Path.resolve(import.meta.dirname, "../../dist/agentwire.mjs")

export interface Proc {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (128 + n for a signal), rejects after `ms`. */
  readonly exited: (ms: number) => Promise<number>
  /** Resolves with the first complete stderr line matching `pattern`, rejects after `ms`. */
  readonly line: (pattern: RegExp, ms: number) => Promise<string>
  readonly kill: () => void
}

export const start = (args: ReadonlyArray<string>): Proc => {
  const out: Array<string> = []
  const err: Array<string> = []
  const child = spawn(process.execPath, [binary, ...args], {
    env: { PATH: process.env["PATH"] ?? "", HOME: Os.tmpdir() },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout!.on("data", (d: Buffer) => out.push(d.toString("utf8")))
  child.stderr!.on("data", (d: Buffer) => err.push(d.toString("utf8")))
  const exit = new Promise<number>((resolve) =>
    child.on("exit", (code, signal) => resolve(code ?? (signal === null ? -1 : 128))))
  const within = <A>(p: Promise<A>, ms: number, what: string) =>
    new Promise<A>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms; stderr:\n${err.join("")}\nstdout:\n${out.join("")}`)), ms)
      p.then((a) => {
        clearTimeout(timer)
        resolve(a)
      }, reject)
    })
  return {
    child,
    stdout: () => out.join(""),
    stderr: () => err.join(""),
    exited: (ms) => within(exit, ms, `agentwire ${args.slice(0, 2).join(" ")} did not exit`),
    line: (pattern, ms) =>
      within(
        new Promise<string>((resolve) => {
          const look = () => {
            // Only complete lines: a chunk can end mid-line.
            const found = err.join("").split("\n").slice(0, -1).find((l) => pattern.test(l))
            if (found !== undefined) resolve(found)
            else setTimeout(look, 20)
          }
          look()
        }),
        ms,
        `no stderr line matching ${pattern}`
      ),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    }
  }
}

export const tempDir = (): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), "aw-kit-"))

/** The scenarios the kit replays against an external Core: those a Runtime drives by itself (pinned in Kit.test.ts). */
export const coreKitScenarios: ReadonlyArray<string> = allScenarios
  .filter((s) => Option.isNone(kitIneligibility(s, "core")))
  .map((s) => s.name)
