/**
 * Issue #17, one authenticated device flooding Core: binary frames are refused like the daemon refuses them,
 * invalid frames are logged in a bounded burst plus a summary, and the connection is closed (1008) past the
 * documented threshold (64 per 60 s window). The budget's boundaries are tested on explicit clock values; the
 * session test runs on TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { ObservationLost } from "../../../src/core/Errors.js"
import {
  defaultInvalidFrameBudget,
  makeInvalidFrameBudget
} from "../../../src/core/transport/internal/invalidFrames.js"
import { Messages } from "../../../src/proto/index.js"
import { connectMemory, device, heartbeat, kind, runId } from "../../support/coreScriptedRuntime.js"
import { captureLogs, collect, gatewayLayer, settle } from "./helpers.js"

const { closeThreshold, logBurst } = defaultInvalidFrameBudget
const windowMillis = 60_000

describe("the invalid-frame budget", () => {
  it("logs the first 8 of a window, counts the rest, and closes on the 65th", () => {
    const budget = makeInvalidFrameBudget()
    const verdicts = Array.from({ length: closeThreshold }, () => budget.admit("not_json", 1_000))
    assert.strictEqual(verdicts.filter((v) => v.log).length, logBurst)
    assert.isFalse(verdicts.some((v) => v.close))
    const last = budget.admit("unknown_type", 1_000)
    assert.deepStrictEqual(last, {
      log: false,
      close: true,
      summary: { unlogged: closeThreshold - logBurst, byCode: { not_json: closeThreshold - logBurst } }
    })
    // Closed once: later frames (still queued) neither log nor close again.
    assert.deepStrictEqual(budget.admit("not_json", 1_001), { log: false, close: false })
  })

  it("a frame 1 ms before the window ends still counts; at the window's end a new window starts with a summary", () => {
    const before = makeInvalidFrameBudget()
    for (let i = 0; i < closeThreshold; i++) before.admit("not_json", 0)
    assert.isTrue(before.admit("not_json", windowMillis - 1).close)

    const at = makeInvalidFrameBudget()
    for (let i = 0; i < closeThreshold; i++) at.admit("not_json", 0)
    const next = at.admit("invalid_payload", windowMillis)
    assert.deepStrictEqual(next, {
      log: true,
      close: false,
      summary: { unlogged: closeThreshold - logBurst, byCode: { not_json: closeThreshold - logBurst } }
    })
  })
})

describe("DeviceSession under invalid frames", () => {
  it.effect("refuses a binary frame as not_json, even when its bytes are a valid heartbeat", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const text = Messages.encodeMessage(heartbeat([kind("codex")]))
      assert.isTrue(text._tag === "Success")
      yield* connection.runtime.sendBinary(new TextEncoder().encode(text._tag === "Success" ? text.success : ""))
      yield* settle(connection)
      assert.deepStrictEqual(yield* connection.session.declaration, Option.none())
      assert.isTrue(logs.lines.some((line) => line.includes("invalid frame dropped") && line.includes("not_json")))
      assert.isUndefined(connection.accepted.pollUnsafe())
    }).pipe(Effect.provide(gatewayLayer().pipe(Layer.provideMerge(logs.layer))))
  })

  it.effect("keeps the connection through 64 invalid frames with 8 log lines, closes with 1008 on the 65th", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      for (let i = 0; i < closeThreshold; i++) yield* connection.runtime.sendRaw(`not json ${i} TOPSECRET`)
      yield* settle(connection)
      assert.isUndefined(connection.accepted.pollUnsafe())
      assert.strictEqual(logs.lines.filter((line) => line.includes("invalid frame dropped")).length, logBurst)

      yield* connection.runtime.sendRaw("one too many")
      assert.deepStrictEqual(yield* connection.runtime.closedByCore, { code: 1008, reason: "invalid_frame" })
      assert.deepStrictEqual(yield* connection.session.closed, new ObservationLost({ reason: "invalid_frame" }))
      assert.deepStrictEqual((yield* collect(run)).exit, Exit.fail(new ObservationLost({ reason: "invalid_frame" })))
      assert.isTrue(logs.lines.some((line) => line.includes("invalid frames not logged individually") && line.includes(`${closeThreshold - logBurst}`)))
      assert.isTrue(logs.lines.some((line) => line.includes("too many invalid frames")))
      assert.isFalse(logs.lines.some((line) => line.includes("TOPSECRET")))
      assert.strictEqual(logs.lines.filter((line) => line.includes("invalid frame dropped")).length, logBurst)
    }).pipe(Effect.provide(gatewayLayer().pipe(Layer.provideMerge(logs.layer))))
  })
})
