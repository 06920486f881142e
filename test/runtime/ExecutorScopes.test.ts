/**
 * Ownership as nested scopes: a Harness that creates real native state (a temporary directory) inside
 * `prepare` and is interrupted mid-preparation — by `execution_release`, by `device_shutdown`, by the connection
 * ending, or by a direct Run stopped before its Turn — leaves nothing behind, and the adapter's last-resort
 * release is a no-op after a confirmed close. A connection still open when its Scope closes closes its Executors
 * (confirmed) before the Scope's earlier releases run. (Admission expiry starts only at `ready`, after the preparation
 * returned, so no expiry interrupts one: an expired admission hands its Executor back to the idle pool.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Executor, Harness } from "../../src/runtime/harness/Harness.js"
import { scriptedDeclaration } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import {
  connect,
  disconnect,
  next,
  prepareFrame,
  processLayer,
  promptFrame,
  releaseFrame,
  same,
  silent,
  text
} from "../support/runtimeTestWire.js"

interface NativeProbe {
  /** The directory the current preparation created. */
  readonly created: Deferred.Deferred<string>
  /** How often the adapter's last-resort release removed something. */
  removedByRelease: number
  /** How often the confirmed close removed the directory. */
  closed: number
}

/**
 * A kind whose preparation creates a temporary directory under `Effect.acquireRelease` (the release removes it
 * when it still exists), then waits forever unless `completes`; its Executor's close removes the directory.
 */
const nativeHarness = (probe: NativeProbe, completes: boolean): Harness => ({
  declaration: { ...scriptedDeclaration(), kind: "native" },
  prepare: () =>
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.promise(() => mkdtemp(join(tmpdir(), "agentwire-native-"))),
        (dir) =>
          Effect.promise(async () => {
            if (!existsSync(dir)) return
            await rm(dir, { recursive: true, force: true })
            probe.removedByRelease++
          })
      )
      yield* Deferred.succeed(probe.created, dir)
      if (!completes) return yield* Effect.never
      const executor: Executor = {
        startTurn: () => Effect.die("unused"),
        nativeSessionId: Effect.succeed(Option.none()),
        close: Effect.promise(async () => {
          await rm(dir, { recursive: true, force: true })
          probe.closed++
        })
      }
      return executor
    })
})

const probe = (): NativeProbe => ({ created: Deferred.makeUnsafe<string>(), removedByRelease: 0, closed: 0 })

describe("Executor scopes", () => {
  const hanging = probe()
  it.effect("execution_release during a preparation that created native state removes it before `released`", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { agent_kind: "native" }))
      same((yield* next(core, "preparation_status")).payload.state, "preparing")
      const dir = yield* Deferred.await(hanging.created)
      assert.isTrue(existsSync(dir))
      yield* core.toRuntime(releaseFrame("prep-1", "handle-1"))
      same((yield* next(core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "released"
      })
      assert.isFalse(existsSync(dir))
      assert.strictEqual(hanging.removedByRelease, 1)
      same((yield* (yield* StatusBoard).snapshot).executors, [])
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer({ harnesses: [nativeHarness(hanging, false)] }))))

  const drained = probe()
  it.effect("device_shutdown during a preparation that created native state removes it before `failed` and the drain's end", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* c.core.toRuntime(prepareFrame("prep-1", { agent_kind: "native" }))
      same((yield* next(c.core, "preparation_status")).payload.state, "preparing")
      const dir = yield* Deferred.await(drained.created)
      assert.isTrue(existsSync(dir))
      yield* c.core.toRuntime({ type: "device_shutdown", payload: { reason: "drain" } })
      same((yield* next(c.core, "preparation_status")).payload, {
        executor_id: "executor-1", handle: "handle-1", revision: 2, state: "failed", error_code: "connection_closed"
      })
      assert.isFalse(existsSync(dir))
      assert.strictEqual(drained.removedByRelease, 1)
      same(yield* Fiber.join(c.fiber), { _tag: "ShutdownRequested" })
      same((yield* (yield* StatusBoard).snapshot).executors, [])
    }).pipe(Effect.provide(processLayer({ harnesses: [nativeHarness(drained, false)] }))))

  const dropped = probe()
  it.effect("a connection that ends during a preparation removes the native state before `run` returns", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* c.core.toRuntime(prepareFrame("prep-1", { agent_kind: "native" }))
      const dir = yield* Deferred.await(dropped.created)
      yield* disconnect(c)
      assert.isFalse(existsSync(dir))
      assert.strictEqual(dropped.removedByRelease, 1)
    }).pipe(Effect.provide(processLayer({ harnesses: [nativeHarness(dropped, false)] }))))

  const direct = probe()
  it.effect("a direct Run stopped while its Executor prepares removes the native state", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* c.core.toRuntime(promptFrame("run-1", text("x"), { agent_kind: "native" }))
      const dir = yield* Deferred.await(direct.created)
      yield* disconnect(c)
      assert.isFalse(existsSync(dir))
      assert.strictEqual(direct.removedByRelease, 1)
    }).pipe(Effect.provide(processLayer({ harnesses: [nativeHarness(direct, false)] }))))

  const closedOnce = probe()
  it.effect("a prepared Executor closed at the connection's end is closed once, and the release removes nothing", () =>
    Effect.gen(function* () {
      const c = yield* connect()
      yield* c.core.toRuntime(prepareFrame("prep-1", { agent_kind: "native" }))
      same((yield* next(c.core, "preparation_status")).payload.state, "preparing")
      same((yield* next(c.core, "preparation_status")).payload.state, "ready")
      const dir = yield* Deferred.await(closedOnce.created)
      yield* disconnect(c)
      assert.isFalse(existsSync(dir))
      assert.strictEqual(closedOnce.closed, 1)
      assert.strictEqual(closedOnce.removedByRelease, 0)
    }).pipe(Effect.provide(processLayer({ harnesses: [nativeHarness(closedOnce, true)] }))))

  const atScopeEnd = probe()
  it.effect("a connection still open when its Scope closes closes its Executors before the Scope's earlier releases", () =>
    Effect.gen(function* () {
      // What the earlier release (e.g. removing the daemon's state directory) saw when it ran.
      const seen: Array<{ readonly closed: number; readonly dirExists: boolean }> = []
      let dir = ""
      yield* Effect.gen(function* () {
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => void seen.push({ closed: atScopeEnd.closed, dirExists: existsSync(dir) })))
        const c = yield* connect()
        yield* c.core.toRuntime(prepareFrame("prep-1", { agent_kind: "native" }))
        same((yield* next(c.core, "preparation_status")).payload.state, "preparing")
        same((yield* next(c.core, "preparation_status")).payload.state, "ready")
        dir = yield* Deferred.await(atScopeEnd.created)
        // The test ends here with the Executor open: no release, no disconnect.
      }).pipe(Effect.scoped, Effect.provide(processLayer({ harnesses: [nativeHarness(atScopeEnd, true)] })))
      same(seen, [{ closed: 1, dirExists: false }])
      assert.strictEqual(atScopeEnd.removedByRelease, 0)
    }))
})
