/**
 * The JSON log format: one flat object per line (annotations at the top level, reserved names prefixed), and
 * an error's cause as one string field, so a failure never becomes a plain-text block.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Console, Effect, Logger } from "effect"
import { flushLogLines, formatFlatJson, loggerFor, withBatchedConsoleError } from "../../src/bin/Logging.js"

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

/** A console whose `error` calls are recorded (each call's text). */
const recordingConsole = (calls: Array<string>): Console.Console => ({
  ...globalThis.console,
  error: (...args: ReadonlyArray<unknown>) => {
    calls.push(args.map(String).join(" "))
  }
} as unknown as Console.Console)

const nextTask = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("Logging (lines written once per task)", () => {
  const logged = (console: Console.Console, message: string) =>
    Effect.logInfo(message).pipe(
      Effect.provide(Logger.layer([withBatchedConsoleError(Logger.map(Logger.formatStructured, (r) => String(r.message)))])),
      Effect.provideService(Console.Console, console)
    )

  it.effect("writes the lines of one task as one console call, in order, before the next task", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      const console = recordingConsole(calls)
      yield* logged(console, "one")
      yield* logged(console, "two")
      yield* logged(console, "three")
      assert.deepStrictEqual(calls, [])
      yield* nextTask
      assert.deepStrictEqual(calls, ["one\ntwo\nthree"])
      yield* logged(console, "four")
      yield* nextTask
      assert.deepStrictEqual(calls, ["one\ntwo\nthree", "four"])
    }))

  it.effect("flushLogLines writes what is pending at once; a line for another console writes the first one's before it", () =>
    Effect.gen(function* () {
      const first: Array<string> = []
      const second: Array<string> = []
      const console = recordingConsole(first)
      const other = recordingConsole(second)
      yield* logged(console, "a")
      flushLogLines()
      assert.deepStrictEqual(first, ["a"])
      yield* logged(console, "b")
      yield* logged(console, "c")
      yield* logged(other, "d")
      assert.deepStrictEqual(first, ["a", "b\nc"])
      assert.deepStrictEqual(second, [])
      yield* nextTask
      assert.deepStrictEqual(second, ["d"])
    }))

  it.effect("the json logger of the binary writes the same lines once per task", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      const console = recordingConsole(calls)
      yield* Effect.gen(function* () {
        yield* Effect.logInfo("x")
        yield* Effect.logInfo("y")
      }).pipe(Effect.provide(Logger.layer([loggerFor("json")])), Effect.provideService(Console.Console, console))
      assert.deepStrictEqual(calls, [])
      yield* nextTask
      assert.strictEqual(calls.length, 1)
      assert.deepStrictEqual(calls[0]!.split("\n").map((l) => JSON.parse(l).msg), ["x", "y"])
    }))
})
