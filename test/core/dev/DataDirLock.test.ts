/**
 * The Core's data-directory lock: one holder at a time, in this process and across processes; released when
 * the scope closes or the holding process dies (even by SIGKILL); a second dev Core fails before it creates
 * or opens the store.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Redacted } from "effect"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DataDirLock from "../../../src/core/dev/DataDirLock.js"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"

const withDir = <A, E, R>(f: (dir: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "agentwire-lock-"))),
    f,
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

/** A separate Node process that takes the lock the same way and prints "held" (killed by the caller). */
const holdInChild = (dir: string) =>
  Effect.acquireRelease(
    Effect.callback<ReturnType<typeof spawn>>((resume) => {
      const child = spawn(process.execPath, [
        "-e",
        `const { DatabaseSync } = require("node:sqlite");
         const db = new DatabaseSync(${JSON.stringify(DataDirLock.lockFile(dir))}, { timeout: 0 });
         db.exec("PRAGMA locking_mode=EXCLUSIVE"); db.exec("BEGIN EXCLUSIVE");
         process.stdout.write("held\\n"); setInterval(() => {}, 1 << 30);`
      ], { stdio: ["ignore", "pipe", "inherit"] })
      child.stdout!.once("data", () => resume(Effect.succeed(child)))
    }),
    (child) =>
      Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

const killed = (child: ReturnType<typeof spawn>) =>
  Effect.callback<void>((resume) => {
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

describe("DataDirLock", () => {
  it.effect("admits one holder; a second fails with the holder's published URL; the lock frees when the scope closes", () =>
    withDir((dir) =>
      Effect.gen(function* () {
        yield* Effect.scoped(Effect.gen(function* () {
          yield* DataDirLock.acquire(dir)
          yield* DataDirLock.writeAddress(dir, { url: "http://127.0.0.1:7400", pid: 1234 })
          const second = yield* Effect.exit(Effect.scoped(DataDirLock.acquire(dir)))
          assert.isTrue(Exit.isFailure(second))
          const error = Exit.isFailure(second) ? second.cause.reasons[0] : undefined
          assert.strictEqual(error?._tag, "Fail")
          const failure = error?._tag === "Fail" ? error.error : undefined
          assert.strictEqual(failure?._tag, "DataDirLocked")
          assert.strictEqual(failure?.message, `another agentwire core is using the data directory ${dir} (listening on http://127.0.0.1:7400); stop it or choose another --data-dir`)
          assert.deepStrictEqual(yield* DataDirLock.probe(dir), Option.some({ url: "http://127.0.0.1:7400", pid: 1234 }))
        }))
        assert.isFalse(existsSync(DataDirLock.addressFile(dir)), "the published address is removed with the lock")
        assert.deepStrictEqual(yield* DataDirLock.probe(dir), Option.none())
        yield* Effect.scoped(DataDirLock.acquire(dir))
      })
    ))

  it.effect("probe never creates a lock file in a directory no Core used", () =>
    withDir((dir) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(yield* DataDirLock.probe(dir), Option.none())
        assert.isFalse(existsSync(DataDirLock.lockFile(dir)))
      })
    ))

  it.live("is exclusive across processes and released by the kernel when the holder is killed (SIGKILL)", () =>
    withDir((dir) =>
      Effect.scoped(Effect.gen(function* () {
        const child = yield* holdInChild(dir)
        const locked = yield* Effect.exit(Effect.scoped(DataDirLock.acquire(dir)))
        assert.isTrue(Exit.isFailure(locked))
        assert.isTrue(Option.isSome(yield* DataDirLock.probe(dir)))
        yield* killed(child)
        // no stale lock: the next holder takes it at once
        yield* Effect.scoped(DataDirLock.acquire(dir))
      }))
    ))

  it.live("a second dev Core on a locked data directory fails before it creates or opens the store", () =>
    withDir((dir) =>
      Effect.scoped(Effect.gen(function* () {
        yield* DataDirLock.acquire(dir)
        const exit = yield* Effect.exit(Layer.build(DevCore.layer({
          dataDir: dir,
          operatorToken: Redacted.make("t".repeat(32)),
          ids: DevIds.layerTest
        })))
        assert.isTrue(Exit.isFailure(exit))
        const reason = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
        assert.strictEqual(reason?._tag === "Fail" ? reason.error._tag : undefined, "DataDirLocked")
        assert.isFalse(existsSync(join(dir, "agentwire.db")), "the store was never created")
      }))
    ))
})
