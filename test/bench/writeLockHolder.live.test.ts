/**
 * The durable suite's condition (bench/support/writeLockHolder.ts), on real time: while the holder process runs,
 * a second connection that does not wait (busy timeout 0) finds the write lock taken at some attempt, and once
 * the holder is stopped it never does; `stop` reports the holds it completed. Judged by outcome, not duration.
 * The holder is ready only once it has the lock: while someone else holds it, `startWriteLockHolder` does not
 * resolve, and when it resolves the lock is already taken (the durable suite's run starts on a held lock).
 */
import { assert, describe, it } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { startWriteLockHolder } from "../../bench/support/writeLockHolder.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether `BEGIN IMMEDIATE` on `db` fails with SQLITE_BUSY now (commits at once when it succeeds). */
const lockTaken = (db: DatabaseSync): boolean => {
  try {
    db.exec("BEGIN IMMEDIATE")
    db.exec("COMMIT")
    return false
  } catch (error) {
    if (error instanceof Error && /locked|busy/i.test(error.message)) return true
    throw error
  }
}

describe("bench write-lock holder", () => {
  it("holds the database's write lock from another process until stopped", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-lockholder-"))
    const file = join(dir, "bench.db")
    const db = new DatabaseSync(file, { timeout: 0 })
    try {
      db.exec("PRAGMA journal_mode = WAL")
      const holder = await startWriteLockHolder(file, { holdMs: 60, gapMs: 20 })
      let taken = false
      for (let i = 0; i < 100 && !taken; i++) {
        taken = lockTaken(db)
        await sleep(5)
      }
      await sleep(200)
      const { heldMs, holds } = await holder.stop()
      assert.isTrue(taken)
      assert.isAtLeast(holds, 1)
      assert.isAtLeast(heldMs, 50 * holds)
      for (let i = 0; i < 5; i++) assert.isFalse(lockTaken(db))
    } finally {
      db.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 20_000)

  it("resolves only once its first hold has the lock", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-lockholder-"))
    const file = join(dir, "bench.db")
    const db = new DatabaseSync(file, { timeout: 0 })
    const other = new DatabaseSync(file, { timeout: 0 })
    try {
      db.exec("PRAGMA journal_mode = WAL")
      other.exec("BEGIN IMMEDIATE") // someone else has the lock: the holder's first hold waits in its busy handler
      let resolved = false
      const started = startWriteLockHolder(file, { holdMs: 2000, gapMs: 20 }).then((holder) => {
        resolved = true
        return holder
      })
      await sleep(500)
      assert.isFalse(resolved, "ready while another connection held the lock")
      other.exec("COMMIT")
      const holder = await started
      assert.isTrue(lockTaken(db), "the lock was free when the holder said ready")
      await holder.stop()
    } finally {
      other.close()
      db.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 20_000)
})
