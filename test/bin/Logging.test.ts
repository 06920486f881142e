/**
 * The JSON log format: one flat object per line (annotations at the top level, reserved names prefixed), and
 * an error's cause as one string field, so a failure never becomes a plain-text block.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Logger } from "effect"
import { formatFlatJson } from "../../src/bin/Logging.js"

const capture = (lines: Array<string>) =>
  Logger.layer([Logger.make((options) => {
    lines.push(formatFlatJson.log(options))
  })])

describe("Logging (json)", () => {
  it.effect("writes flat objects: annotations as fields, spans as *_ms, no nested annotations", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      yield* Effect.logInfo("turn finished").pipe(
        Effect.annotateLogs({ turn_id: "turn-1", connection: 3, msg: "shadow" }),
        Effect.withLogSpan("turn"),
        Effect.provide(capture(lines))
      )
      assert.strictEqual(lines.length, 1)
      const record = JSON.parse(lines[0]!)
      assert.strictEqual(record.level, "INFO")
      assert.strictEqual(record.msg, "turn finished")
      assert.strictEqual(record.turn_id, "turn-1")
      assert.strictEqual(record.connection, 3)
      assert.strictEqual(record.a_msg, "shadow")
      assert.isNumber(record.turn_ms)
      assert.isString(record.ts)
      assert.notProperty(record, "annotations")
    }))

  it.effect("keeps a multi-line error cause on the same line, as the cause field", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      yield* Effect.logError("fatal", Cause.fail(new Error("line one\nline two"))).pipe(Effect.provide(capture(lines)))
      assert.strictEqual(lines.length, 1)
      assert.notInclude(lines[0]!, "\n")
      const record = JSON.parse(lines[0]!)
      assert.strictEqual(record.level, "ERROR")
      assert.include(record.cause, "line one")
      assert.include(record.cause, "line two")
    }))
})
