/**
 * The model key of each real kind never leaves the child's environment: a Turn through the Runtime (in-memory
 * transport, the real binary, the fake model server) with every log line captured at debug level, then the key
 * is searched in the argv of every process the Executor runs (`/proc/<pid>/cmdline`), in every frame the Runtime
 * sent Core, in the status snapshot (`agentwire status`), in every log line, and in the declaration. The
 * daemon's own credential variable (`AGENTWIRE_*`) never reaches a child's environment either. Codex's shell
 * snapshots and the commands it runs are covered in codex.live.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, References, type Scope } from "effect"
import * as Fs from "node:fs"
import { formatStatus } from "../../src/bin/commands/status.js"
import type { Harness } from "../../src/runtime/harness/Harness.js"
import { processStat } from "../../src/runtime/harness/process/ProcessTable.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { claudeCodeAgainstFake, spawnedClaudePids } from "../support/claudeCodeFixture.js"
import { codexFixture, secretKey as codexKey, spawnedCodexPids } from "../support/fakeResponsesCodex.js"
import { connect, next, prepareFrame, processLayer, startFrame, text, until } from "../support/runtimeTestWire.js"

/** Every live process of the group led by `pid` (the leader included). */
const group = (pid: number) =>
  Fs.readdirSync("/proc").flatMap((e) => (/^\d+$/.test(e) && processStat(Number(e))?.pgrp === pid ? [Number(e)] : []))
const read = (file: string) => {
  try {
    return Fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}

const scenario = (options: {
  readonly kind: string
  readonly harness: Effect.Effect<Harness, never, Scope.Scope>
  readonly spawned: ReadonlyArray<number>
  readonly key: string
  readonly credential: string
}) =>
  Effect.gen(function* () {
    const harness = yield* options.harness
    const lines: Array<string> = []
    const capture = Logger.map(Logger.formatJson, (line) => void lines.push(line))
    const before = options.spawned.length
    yield* Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: options.kind, agent_options: { model: "fake-model" } }))
      const frames: Array<unknown> = [yield* next(core, "preparation_status"), yield* next(core, "preparation_status")]
      const pids = options.spawned.slice(before).flatMap(group)
      assert.isAbove(pids.length, 0, "the Executor's processes are running")
      for (const pid of pids) {
        assert.notInclude(read(`/proc/${pid}/cmdline`), options.key, `argv of pid ${pid}`)
        assert.notInclude(read(`/proc/${pid}/environ`), options.credential, `the daemon credential is not in pid ${pid}'s environment`)
      }
      yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", text("hello secrets")))
      frames.push(...(yield* until(core, "done")))
      const board = yield* (yield* StatusBoard).snapshot
      for (const [what, value] of [["frames", frames], ["status", board], ["declaration", harness.declaration]] as const) {
        assert.notInclude(JSON.stringify(value), options.key, what)
      }
      // `agentwire status` shows the kind, its version and availability (the daemon's status snapshot, rendered).
      const kind = board.kinds.find((k) => k.kind === options.kind)
      assert.isTrue(kind?.available === true, JSON.stringify(kind))
      if (options.kind === "codex") assert.include(formatStatus(board), "  codex 0.171.0: available, ")
      yield* Effect.logDebug("capture sentinel")
    }).pipe(
      Effect.provide(Layer.mergeAll(processLayer({ harnesses: [harness] }), Logger.layer([capture]))),
      Effect.provideService(References.MinimumLogLevel, "Debug")
    )
    assert.isTrue(lines.some((l) => l.includes("capture sentinel")), "the capture sees debug lines")
    for (const line of lines) assert.notInclude(line, options.key)
  })

describe("model keys stay secret (real binaries)", () => {
  it.live("codex: never in argv, frames, status or logs; the daemon credential never in its environment", () =>
    scenario({
      kind: "codex",
      harness: Effect.map(codexFixture, (f) => f.harness),
      spawned: spawnedCodexPids,
      key: codexKey,
      credential: "aw-secret-cred"
    }), 90_000)

  it.live("claude_code: never in argv, frames, status or logs", () =>
    scenario({
      kind: "claude_code",
      harness: Effect.map(claudeCodeAgainstFake(), (f) => f.harness),
      spawned: spawnedClaudePids,
      key: "sk-ant-fake-test-key",
      credential: "AGENTWIRE_"
    }), 90_000)
})
