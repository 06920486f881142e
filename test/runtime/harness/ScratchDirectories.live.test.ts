/**
 * An Executor's directories (the Claude Code and Codex scratch directories, a per-Executor CODEX_HOME) are owned
 * until their removal is confirmed (OwnedDirectory.ts). A removal that fails is never a defect: after a failed or
 * interrupted preparation the Executor's close reports `unconfirmed` at once (the admission answers `failed` /
 * `executor_cleanup_unconfirmed`, status `cleanup_unconfirmed`, the directory listed as `scratch:<executor id>`),
 * keeps the directory and its capacity, retries on the cleanup backoff and completes once the removal succeeds
 * (then `released`). A removal that succeeds leaves nothing.
 *
 * No real Harness binary: a missing binary (the preparation fails after the scratch directory exists) or a
 * stand-in that reads stdin and never answers (the preparation waits until interrupted); the removal is injected
 * (tests run as root, so a permission cannot make `rm` fail). Retries run on the TestClock; the real file system
 * and process calls are awaited with short real waits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Option, Result } from "effect"
import { TestClock } from "effect/testing"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { ExecutorId } from "../../../src/proto/Ids.js"
import { unsafeMake } from "../../../src/proto/Ids.js"
import { type ExecutorEntry, makeWith, type ReserveSpec } from "../../../src/runtime/Executors.js"
import { prepareExecutor as prepareClaudeCode } from "../../../src/runtime/harness/claude_code/ClaudeCodeExecutor.js"
import { claudeCodeCapabilities } from "../../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import { settingsFromEnv } from "../../../src/runtime/harness/claude_code/ClaudeCodeSettings.js"
import { prepareExecutor as prepareCodex } from "../../../src/runtime/harness/codex/CodexExecutor.js"
import { codexDeclaration } from "../../../src/runtime/harness/codex/CodexHarness.js"
import type { Harness, HarnessDeclaration } from "../../../src/runtime/harness/Harness.js"
import { ownedDirectory, type RemoveDirectory, removeRecursively } from "../../../src/runtime/harness/OwnedDirectory.js"
import { Ownership } from "../../../src/runtime/Ownership.js"
import { RuntimePolicy } from "../../../src/runtime/RuntimePolicy.js"
import { isRunning } from "../../support/processAlive.js"
import { StatusBoard } from "../../../src/runtime/StatusBoard.js"
import { connect, next, prepareFrame, preparedConfiguration, processLayer, same, settle } from "../../support/runtimeTestWire.js"

const layer = Layer.mergeAll(Ownership.layer, RuntimePolicy.layer())

/** A removal that fails with EBUSY while `fail` is set. */
const switchable = () => {
  const removal = { fail: true, attempts: 0 }
  const remove: RemoveDirectory = async (path) => {
    removal.attempts++
    if (removal.fail) throw Object.assign(new Error(`EBUSY: resource busy, rmdir '${path}'`), { code: "EBUSY" })
    await removeRecursively(path)
  }
  return { removal, remove }
}

/** A temporary profile directory for the test's scope. */
const profile = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-scratch-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Waits (real time) for the file system or a process; the TestClock does not move. */
const until = (condition: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 400 && !condition(); i++) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
      yield* settle
    }
    assert.isTrue(condition(), "condition not reached in 2 s")
  })

/** Awaits a fiber that finishes on real I/O. */
const joinReal = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Effect.gen(function* () {
    let done: Option.Option<Exit.Exit<A, E>> = Option.none()
    yield* until(() => {
      done = Option.fromNullishOr(fiber.pollUnsafe())
      return Option.isSome(done)
    })
    return yield* Fiber.join(fiber)
  })

/** A stand-in binary that reads stdin and never answers (the preparation waits for its handshake). */
const silentBinary = (dir: string) => {
  const file = Path.join(dir, "silent")
  Fs.writeFileSync(file, "#!/bin/sh\nwhile read -r line; do :; done\n", { mode: 0o700 })
  return file
}

const list = (dir: string) => (Fs.existsSync(dir) ? Fs.readdirSync(dir) : [])

const executorId = (name: string) => unsafeMake.executorId(name) as ExecutorId

const reserve = (executors: Effect.Success<ReturnType<typeof makeWith>>, id: ExecutorId, declaration: HarnessDeclaration) =>
  Effect.gen(function* () {
    const spec: ReserveSpec = {
      sessionId: undefined,
      kind: declaration.kind,
      declaration,
      configuration: preparedConfiguration(),
      configFingerprint: "fp",
      retained: false,
      readOnly: false
    }
    const reserved = yield* executors.reserve(id, spec)
    assert.isTrue(Result.isSuccess(reserved))
    return (reserved as Result.Success<ExecutorEntry, never>).success
  })

const requestFor = (entry: ExecutorEntry) => ({
  executorId: entry.id,
  sessionId: entry.sessionId,
  configuration: entry.configuration,
  declaration: entry.declaration
})

const claudeDeclaration: HarnessDeclaration = {
  kind: "claude_code",
  available: true,
  version: "2.1.332",
  capabilities: claudeCodeCapabilities
}

const claudeHarness = (dir: string, binary: string, remove: RemoveDirectory, spawned: Array<number>): Harness => {
  const settings = {
    ...settingsFromEnv({ PATH: process.env.PATH }, { profileDir: dir, binaryPath: Option.some(binary) }),
    removeDirectory: remove,
    observeSpawn: (pid: number) => void spawned.push(pid)
  }
  return { declaration: claudeDeclaration, prepare: (request) => prepareClaudeCode(settings, binary, request) }
}

const codexHarness = (dir: string, binary: string, remove: RemoveDirectory, spawned: Array<number>): Harness => ({
  declaration: codexDeclaration("0.171.0", undefined),
  prepare: (request) =>
    prepareCodex({
      command: binary,
      prefix: [],
      overrides: [],
      env: {},
      secrets: {},
      root: Path.join(dir, "codex"),
      reconnectBudget: Duration.seconds(30),
      removeDirectory: remove,
      observeSpawn: (pid) => void spawned.push(pid)
    }, request)
})

describe("OwnedDirectory", () => {
  it.effect("a confirmed removal removes the directory; the release then only drops the ownership record", () =>
    Effect.gen(function* () {
      const dir = yield* profile
      const ownership = yield* Ownership
      const path = Path.join(dir, "scratch")
      const { removal, remove } = switchable()
      removal.fail = false
      const owned = yield* ownedDirectory({
        resource: "scratch:e1",
        label: "the scratch directory",
        create: Effect.sync(() => (Fs.mkdirSync(path), path)),
        removeDirectory: remove
      }).pipe(
        Effect.flatMap((d) => Effect.sync(() => assert.isTrue(Fs.existsSync(d.path)))),
        Effect.scoped,
        Effect.forkChild
      )
      // Closing the scope: its release removed the directory (one attempt) and confirmed it.
      yield* joinReal(owned)
      assert.isFalse(Fs.existsSync(path))
      assert.strictEqual(removal.attempts, 1)
      same(yield* ownership.owned, [])
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("`remove` fails typed (CloseFailed) and keeps the directory owned; after a later success the release is a no-op", () =>
    Effect.gen(function* () {
      const dir = yield* profile
      const ownership = yield* Ownership
      const path = Path.join(dir, "scratch")
      const { removal, remove } = switchable()
      const result = yield* Effect.gen(function* () {
        const owned = yield* ownedDirectory({
          resource: "scratch:e2",
          label: "the scratch directory",
          create: Effect.sync(() => (Fs.mkdirSync(path), path)),
          removeDirectory: remove
        })
        const first = yield* Effect.result(owned.remove)
        same(yield* ownership.owned, [{ resource: "scratch:e2", kind: "executor", state: { _tag: "Active" } }])
        removal.fail = false
        yield* owned.remove
        return first
      }).pipe(Effect.scoped, Effect.forkChild, Effect.flatMap(joinReal))
      assert.isTrue(Result.isFailure(result))
      if (Result.isFailure(result)) {
        assert.strictEqual(result.failure._tag, "CloseFailed")
        assert.strictEqual(result.failure.reason, "cannot remove the scratch directory (EBUSY)")
      }
      assert.strictEqual(removal.attempts, 2, "the release did not remove again")
      assert.isFalse(Fs.existsSync(path))
      same(yield* ownership.owned, [])
    }).pipe(Effect.scoped, Effect.provide(layer)))
})

describe("an Executor's directories whose removal fails", () => {
  it.effect("claude_code, failed preparation: the close reports unconfirmed at once, keeps the directory, and completes once the removal succeeds", () =>
    Effect.gen(function* () {
      const dir = yield* profile
      const ownership = yield* Ownership
      const { removal, remove } = switchable()
      const harness = claudeHarness(dir, Path.join(dir, "missing-claude"), remove, [])
      const executors = yield* makeWith({})
      const entry = yield* reserve(executors, executorId("exec-cc-1"), claudeDeclaration)
      const prepared = yield* Effect.exit(executors.prepare(entry, harness, requestFor(entry)))
      assert.isTrue(Exit.isFailure(prepared))
      assert.include(Option.getOrThrow(Exit.isFailure(prepared) ? Cause.findErrorOption(prepared.cause) : Option.none()).reason, "cannot start Claude Code")
      const scratchRoot = Path.join(dir, "claude-code", "scratch")
      assert.strictEqual(list(scratchRoot).length, 1, "the scratch directory existed before the spawn failed")

      // The close: the removal fails; the first failed attempt is the verdict, not a defect and not a hang.
      same(yield* executors.closeObserved(entry), "unconfirmed")
      same(yield* ownership.unconfirmed, [
        { resource: "scratch:exec-cc-1", kind: "executor", attempts: 1, last_error: "cannot remove the scratch directory (EBUSY)" }
      ])
      same((yield* executors.view).map((e) => e.state), ["cleanup_unconfirmed"])
      same(yield* executors.counts, { active: 1, idle: 0 })
      assert.strictEqual(list(scratchRoot).length, 1, "the directory stays owned")

      // Retried on the cleanup backoff (500 ms first); once the removal succeeds the close completes.
      const closing = yield* Effect.forkChild(executors.close(entry))
      yield* settle
      yield* TestClock.adjust(499)
      assert.strictEqual(removal.attempts, 1)
      removal.fail = false
      yield* TestClock.adjust(1)
      yield* joinReal(closing)
      same(list(scratchRoot), [])
      same(yield* ownership.owned, [])
      same(yield* executors.counts, { active: 0, idle: 0 })
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("codex, preparation interrupted after the spawn: the process is stopped, both directories stay owned until removed, the close completes", () =>
    Effect.gen(function* () {
      const dir = yield* profile
      const ownership = yield* Ownership
      const { removal, remove } = switchable()
      const spawned: Array<number> = []
      const harness = codexHarness(dir, silentBinary(dir), remove, spawned)
      const executors = yield* makeWith({})
      const entry = yield* reserve(executors, executorId("exec-cx-1"), harness.declaration)
      const preparing = yield* Effect.forkChild(executors.prepare(entry, harness, requestFor(entry)))
      yield* until(() => spawned.length === 1)
      const scratch = Path.join(dir, "codex", "scratch", "exec-cx-1")
      const home = Path.join(dir, "codex", "homes", "executor-exec-cx-1")
      assert.isTrue(Fs.existsSync(scratch) && Fs.existsSync(home))
      yield* Fiber.interrupt(preparing)

      same(yield* executors.closeObserved(entry), "unconfirmed")
      yield* until(() => !isRunning(spawned[0]!))
      yield* settle
      // Released in reverse: the process first, then the scratch directory (retried), then the home.
      same(yield* ownership.unconfirmed, [
        { resource: "scratch:exec-cx-1", kind: "executor", attempts: 1, last_error: "cannot remove the scratch directory (EBUSY)" }
      ])
      same((yield* executors.view).map((e) => e.state), ["cleanup_unconfirmed"])
      assert.isTrue(Fs.existsSync(scratch), "the scratch directory stays owned")

      removal.fail = false
      const closing = yield* Effect.forkChild(executors.close(entry))
      yield* settle
      yield* TestClock.adjust(500)
      yield* joinReal(closing)
      assert.isFalse(Fs.existsSync(scratch))
      assert.isFalse(Fs.existsSync(home))
      same(yield* ownership.owned, [])
    }).pipe(Effect.scoped, Effect.provide(layer)))
})

describe("an Executor's directories whose removal succeeds", () => {
  it.effect("claude_code, preparation interrupted after the spawn: the process and the scratch directory are gone after the close", () =>
    Effect.gen(function* () {
      const dir = yield* profile
      const ownership = yield* Ownership
      const { removal, remove } = switchable()
      removal.fail = false
      const spawned: Array<number> = []
      const harness = claudeHarness(dir, silentBinary(dir), remove, spawned)
      const executors = yield* makeWith({})
      const entry = yield* reserve(executors, executorId("exec-cc-2"), claudeDeclaration)
      const preparing = yield* Effect.forkChild(executors.prepare(entry, harness, requestFor(entry)))
      yield* until(() => spawned.length === 1)
      const scratchRoot = Path.join(dir, "claude-code", "scratch")
      assert.strictEqual(list(scratchRoot).length, 1)
      yield* Fiber.interrupt(preparing)
      const closing = yield* Effect.forkChild(executors.closeObserved(entry))
      same(yield* joinReal(closing), "confirmed")
      assert.isFalse(isRunning(spawned[0]!))
      same(list(scratchRoot), [])
      same(yield* ownership.owned, [])
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("codex, failed preparation: both directories are removed and the close confirms", () =>
    Effect.gen(function* () {
      const dir = yield* profile
      const ownership = yield* Ownership
      const { removal, remove } = switchable()
      removal.fail = false
      const harness = codexHarness(dir, Path.join(dir, "missing-codex"), remove, [])
      const executors = yield* makeWith({})
      const entry = yield* reserve(executors, executorId("exec-cx-2"), harness.declaration)
      const prepared = yield* Effect.exit(executors.prepare(entry, harness, requestFor(entry)))
      assert.isTrue(Exit.isFailure(prepared))
      const closing = yield* Effect.forkChild(executors.closeObserved(entry))
      same(yield* joinReal(closing), "confirmed")
      same(list(Path.join(dir, "codex", "scratch")), [])
      same(list(Path.join(dir, "codex", "homes")), [])
      same(yield* ownership.owned, [])
    }).pipe(Effect.scoped, Effect.provide(layer)))
})

describe("through the admission", () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-scratch-wire-"))
  const { removal, remove } = switchable()
  it.effect("a failed preparation whose scratch removal fails answers `failed` / executor_cleanup_unconfirmed at once, then `released` once removed", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: "claude_code" }))
      same((yield* next(core, "preparation_status")).payload.state, "preparing")
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: "executor_cleanup_unconfirmed"
      })
      const board = yield* StatusBoard
      const snapshot = yield* board.snapshot
      same(snapshot.executors.map((e) => e.state), ["cleanup_unconfirmed"])
      same(snapshot.unconfirmed.map((u) => [u.resource, u.kind, u.last_error]), [
        ["scratch:executor-1", "executor", "cannot remove the scratch directory (EBUSY)"]
      ])
      assert.strictEqual(list(Path.join(dir, "claude-code", "scratch")).length, 1)

      removal.fail = false
      yield* settle
      yield* TestClock.adjust(500)
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 3, state: "released"
      })
      same(list(Path.join(dir, "claude-code", "scratch")), [])
      same((yield* board.snapshot).executors, [])
    }).pipe(
      Effect.provide(processLayer({ harnesses: [claudeHarness(dir, Path.join(dir, "missing-claude"), remove, [])] })),
      Effect.ensuring(Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
    ))
})
