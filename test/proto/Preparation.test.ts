/**
 * Preparation status rules (reference part 1 §6.5): the shape each state needs (`validateStatus`) and Core's
 * per-handle revision ordering (`applyRevision`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Ids, Preparation } from "../../src/proto/index.js"

type Status = Preparation.PreparationStatusPayload
const handle = Ids.unsafeMake.admissionHandle("handle-A")
const foreign = Ids.unsafeMake.admissionHandle("handle-B")
const executor_id = Ids.unsafeMake.executorId("executor-1")
const run_id = Ids.unsafeMake.runId("run-1")

const preparing: Status = { handle, revision: 1, state: "preparing" }
const ready: Status = { executor_id, handle, revision: 2, state: "ready", expires_at: 1767225900000 }
const starting: Status = { ...ready, revision: 3, state: "starting", run_id }
const started: Status = { ...ready, revision: 4, state: "started", run_id }
const rejected: Status = { revision: 0, state: "rejected", operation: "execution_prepare", error_code: "preparation_capacity" }

describe("Preparation.validateStatus", () => {
  it("accepts each state in its reference shape", () => {
    for (const status of [
      preparing,
      ready,
      { ...ready, revision: 1, reused: true },
      starting,
      started,
      { handle, revision: 3, state: "released" },
      { handle, revision: 2, state: "expired" },
      { handle, revision: 2, state: "failed", error_code: "preparation_failed" },
      rejected,
      { ...rejected, operation: "execution_start", error_code: "executor_unavailable", handle, executor_id }
    ] satisfies ReadonlyArray<Status>) {
      assert.deepStrictEqual(Preparation.validateStatus(status), Option.none(), status.state)
    }
  })

  it("refuses a rejection without its operation or code, or with a revision", () => {
    const { operation: _o, ...noOperation } = rejected
    const { error_code: _c, ...noCode } = rejected
    for (const status of [noOperation, noCode, { ...rejected, revision: 1 }]) {
      assert.deepStrictEqual(Preparation.validateStatus(status), Option.some("rejected_shape"))
    }
  })

  it("refuses a resource status without a handle or with revision 0", () => {
    const { handle: _h, ...noHandle } = preparing
    assert.deepStrictEqual(Preparation.validateStatus(noHandle), Option.some("missing_handle"))
    assert.deepStrictEqual(Preparation.validateStatus({ ...preparing, revision: 0 }), Option.some("missing_handle"))
  })

  it("refuses ready without the Executor or the expiry", () => {
    const { executor_id: _e, ...noExecutor } = ready
    const { expires_at: _x, ...noExpiry } = ready
    assert.deepStrictEqual(Preparation.validateStatus(noExecutor), Option.some("ready_shape"))
    assert.deepStrictEqual(Preparation.validateStatus(noExpiry), Option.some("ready_shape"))
  })

  it("refuses starting and started without the Run", () => {
    const { run_id: _r1, ...startingWithoutRun } = starting
    const { run_id: _r2, ...startedWithoutRun } = started
    assert.deepStrictEqual(Preparation.validateStatus(startingWithoutRun), Option.some("run_shape"))
    assert.deepStrictEqual(Preparation.validateStatus(startedWithoutRun), Option.some("run_shape"))
  })

  it("refuses failed without a code", () => {
    assert.deepStrictEqual(Preparation.validateStatus({ handle, revision: 2, state: "failed" }), Option.some("failed_shape"))
  })

  it("knows which states end an admission", () => {
    const terminal = Preparation.PreparationState.literals.filter(Preparation.isTerminalState)
    assert.deepStrictEqual([...terminal].sort(), ["expired", "failed", "released", "started"])
  })
})

describe("Preparation.applyRevision", () => {
  it("applies the first resource status and then only strictly newer revisions of the same handle", () => {
    const first = Preparation.applyRevision(undefined, preparing)
    assert.deepStrictEqual(first, { apply: true, cursor: { handle, revision: 1 } })
    const second = Preparation.applyRevision(first.cursor, ready)
    assert.deepStrictEqual(second, { apply: true, cursor: { handle, revision: 2 } })
    const jump = Preparation.applyRevision(second.cursor, started)
    assert.deepStrictEqual(jump, { apply: true, cursor: { handle, revision: 4 } })
  })

  it("ignores older and repeated revisions and keeps the cursor", () => {
    const cursor = { handle, revision: 3 }
    for (const status of [preparing, ready, starting]) {
      assert.deepStrictEqual(Preparation.applyRevision(cursor, status), { apply: false, cursor })
    }
  })

  it("ignores a status of another handle, even a newer one", () => {
    const cursor = { handle, revision: 2 }
    assert.deepStrictEqual(Preparation.applyRevision(cursor, { ...started, handle: foreign, revision: 9 }), { apply: false, cursor })
  })

  it("ignores a resource status without a handle or with revision 0, even as the first one", () => {
    const { handle: _h, ...noHandle } = preparing
    assert.deepStrictEqual(Preparation.applyRevision(undefined, noHandle), { apply: false, cursor: undefined })
    assert.deepStrictEqual(Preparation.applyRevision(undefined, { ...preparing, revision: 0 }), { apply: false, cursor: undefined })
  })

  it("passes a rejection through without changing the cursor", () => {
    const cursor = { handle, revision: 2 }
    assert.deepStrictEqual(Preparation.applyRevision(cursor, rejected), { apply: true, cursor })
    assert.deepStrictEqual(Preparation.applyRevision(undefined, rejected), { apply: true, cursor: undefined })
    const withHandle = { ...rejected, handle, revision: 0 } satisfies Status
    assert.deepStrictEqual(Preparation.applyRevision(cursor, withHandle), { apply: true, cursor })
    assert.deepStrictEqual(Preparation.applyRevision(cursor, ready), { apply: false, cursor })
  })
})
