/**
 * Session diagnostics (the operator API's Turn view) expose the engine category only for a failed Turn whose
 * Core error is `engine_failed` (protocol "engine failure"); the stored outcome keeps it either way.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Outcome from "../../../src/core/Outcome.js"
import { turnView } from "../../../src/core/dev/TurnViews.js"
import type { TurnRecord } from "../../../src/core/dev/TurnStore.js"

const record = (outcome: Outcome.TurnOutcome): TurnRecord => ({
  turnId: "turn-1",
  sessionId: "session-1",
  runId: "run-1",
  deviceId: "dev-1",
  status: outcome.status,
  attempt: 1,
  errorCode: outcome.error_code,
  observationReason: outcome.observation,
  engineErrorCode: outcome.engine_error_code,
  engineHttpStatus: outcome.engine_http_status,
  usage: undefined,
  content: undefined,
  nativeSessionId: undefined,
  outcome,
  input: [{ content: [{ type: "input_text", text: "hi" }] }],
  inputCursor: 0,
  createdAtMs: 1,
  dispatchedAtMs: 2,
  completedAtMs: 3
})

const engine = { engine_error_code: "connection_failed", engine_http_status: 502 } as const

describe("Turn view engine category", () => {
  it("shows the engine category of a failed Turn whose error is engine_failed", () => {
    const outcome: Outcome.TurnOutcome = { status: "failed", error_code: "engine_failed", ...engine }
    assert.deepStrictEqual(turnView(record(outcome)).outcome, outcome)
  })

  it("hides it for every other outcome, and keeps everything else", () => {
    const others: ReadonlyArray<Outcome.TurnOutcome> = [
      { status: "failed", error_code: "event_stream_incomplete", observation: "disconnected", error: "boom", ...engine },
      { status: "failed", error_code: "cancel_unconfirmed", observation: "disconnected", ...engine },
      { status: "completed", content: "ok", ...engine },
      { status: "cancelled", engine_error_code: "rate_limit_exceeded" }
    ]
    for (const outcome of others) {
      const shown = turnView(record(outcome)).outcome
      assert.isNotNull(shown)
      assert.isUndefined(shown!.engine_error_code, outcome.status)
      assert.isUndefined(shown!.engine_http_status, outcome.status)
      const { engine_error_code: _c, engine_http_status: _h, ...rest } = outcome
      assert.deepStrictEqual(shown, rest)
    }
  })

  it("keeps the stored outcome unchanged", () => {
    const outcome: Outcome.TurnOutcome = { status: "completed", ...engine }
    const stored = record(outcome)
    turnView(stored)
    assert.deepStrictEqual(stored.outcome, outcome)
    assert.deepStrictEqual(Outcome.diagnosticOutcome({ status: "failed", error_code: "engine_failed" }), {
      status: "failed",
      error_code: "engine_failed"
    })
  })
})
