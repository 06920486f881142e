/**
 * The generic process supervisor against real processes: own process group, line reading, stdin writes with
 * proof, SIGTERM then SIGKILL after the grace period, descendants killed, and the Scope's release as the
 * last-resort kill. Live clock (real signals and grace periods).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Queue, Scope } from "effect"
import { LineTooLong, spawn } from "../../src/runtime/harness/process/NativeProcess.js"
import { processStat } from "../../src/runtime/harness/process/ProcessTable.js"
import { isRunning } from "../support/processAlive.js"

const sh = (script: string) => ({ command: "/bin/sh", args: ["-c", script], cwd: "/", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, grace: "300 millis" as const })

describe("NativeProcess", () => {
  it.live("reads complete lines and writes stdin lines with proof of the local write", () =>
    Effect.gen(function* () {
      const proc = yield* spawn(sh("while read l; do echo \"got $l\"; done"))
      yield* Effect.orDie(proc.writeLine("one"))
      yield* Effect.orDie(proc.writeLine("two"))
      assert.strictEqual(yield* Effect.orDie(Queue.take(proc.lines)), "got one")
      assert.strictEqual(yield* Effect.orDie(Queue.take(proc.lines)), "got two")
      const exit = yield* proc.terminate
      assert.isFalse(isRunning(proc.pid))
      assert.isTrue(exit.code !== undefined)
    }))

  it.live("leads its own process group and drains stderr: a process writing far more than a pipe holds never blocks", () =>
    Effect.gen(function* () {
      // 1 MiB on stderr (a pipe holds 64 KiB) before the stdout line: undrained, the writer would block forever.
      const proc = yield* spawn(sh("head -c 1048576 /dev/zero | tr '\\0' e >&2; printf 'tail-of-stderr' >&2; echo after-stderr; cat > /dev/null"))
      assert.strictEqual(processStat(proc.pid)?.pgrp, proc.pid, "the process leads its own group")
      assert.notStrictEqual(processStat(proc.pid)?.pgrp, processStat(process.pid)?.pgrp)
      assert.strictEqual(yield* Effect.orDie(Queue.take(proc.lines)), "after-stderr")
      // The stderr pipe's last chunk may be read just after the stdout line.
      let tail = yield* proc.stderrTail
      for (let i = 0; i < 100 && !tail.endsWith("tail-of-stderr"); i++) {
        yield* Effect.sleep("20 millis")
        tail = yield* proc.stderrTail
      }
      assert.isAtMost(tail.length, 4096, "the kept stderr is bounded")
      assert.isTrue(tail.endsWith("tail-of-stderr"))
      yield* proc.terminate
      assert.isFalse(isRunning(proc.pid))
    }))

  it.live("kills a process that ignores SIGTERM after the grace period, with its descendants", () =>
    Effect.gen(function* () {
      const proc = yield* spawn(sh("trap '' TERM; sleep 30 & echo $!; wait"))
      const child = Number(yield* Effect.orDie(Queue.take(proc.lines)))
      assert.isTrue(isRunning(child))
      const exit = yield* proc.terminate
      assert.strictEqual(exit.signal, "SIGKILL")
      assert.isFalse(isRunning(proc.pid))
      assert.isFalse(isRunning(child), "the grandchild in the same group is gone too")
      // Idempotent.
      assert.deepStrictEqual(yield* proc.terminate, exit)
    }))

  it.live("stops the descendants that started their own session, also when the leader leaves by itself", () =>
    Effect.gen(function* () {
      // Codex starts its shell snapshot this way: a new session, so a signal to the leader's group misses it.
      const proc = yield* spawn(sh("setsid sh -c 'echo $$; exec sleep 30' & cat > /dev/null"))
      const detached = Number(yield* Effect.orDie(Queue.take(proc.lines)))
      assert.isTrue(isRunning(detached))
      assert.notStrictEqual(processStat(detached)?.pgrp, proc.pid)
      const exit = yield* proc.stop("5 seconds")
      assert.deepStrictEqual(exit, { code: 0, signal: null }, "the leader left on EOF, no signal was needed for it")
      assert.isFalse(isRunning(detached), "the process in its own session is gone too")
    }))

  it.live("the Scope's release stops the process when its owner is interrupted", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const proc = yield* spawn(sh("sleep 30")).pipe(Scope.provide(scope))
      assert.isTrue(isRunning(proc.pid))
      yield* Scope.close(scope, Exit.interrupt(0))
      assert.isFalse(isRunning(proc.pid))
    }))

  it.live("stop lets a process that exits on stdin EOF leave by itself: no signal is sent", () =>
    Effect.gen(function* () {
      const proc = yield* spawn(sh("cat > /dev/null; exit 7"))
      const exit = yield* proc.stop("5 seconds")
      assert.deepStrictEqual(exit, { code: 7, signal: null })
      assert.isFalse(isRunning(proc.pid))
      // A process that ignores EOF is terminated once the voluntary grace ran out.
      const stubborn = yield* spawn(sh("trap '' HUP; while true; do sleep 1; done"))
      const stopped = yield* stubborn.stop("200 millis")
      assert.strictEqual(stopped.signal, "SIGTERM")
    }))

  it.live("an overlong stdout line ends the line stream with LineTooLong and kills the process", () =>
    Effect.gen(function* () {
      const proc = yield* spawn({ ...sh("echo short; head -c 5000 /dev/zero | tr '\\0' a; sleep 30"), maxLineBytes: 1000 })
      assert.strictEqual(yield* Effect.orDie(Queue.take(proc.lines)), "short")
      const failure = yield* Effect.flip(Queue.take(proc.lines))
      assert.deepStrictEqual(failure, new LineTooLong({ limit: 1000 }))
      const exit = yield* proc.exited
      assert.strictEqual(exit.signal, "SIGKILL")
    }))

  it.live("a binary that cannot start fails with SpawnFailed and leaves nothing", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Effect.scoped(spawn({ command: "/nonexistent/claude", args: [], cwd: "/", env: {} })))
      assert.isTrue(Exit.isFailure(exit))
    }))
})
