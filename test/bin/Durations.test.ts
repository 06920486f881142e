/**
 * Durations on the command line: short forms and Effect's long form; a bare number or junk is refused.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Option, Schema } from "effect"
import { DurationText, normalizeDuration, parseDuration } from "../../src/bin/Durations.js"

describe("Durations", () => {
  it("accepts 500ms, 90s, 10m, 2h, 1d, 1.5h and the long form", () => {
    const cases: ReadonlyArray<readonly [string, Duration.Duration]> = [
      ["500ms", Duration.millis(500)],
      ["90s", Duration.seconds(90)],
      ["10m", Duration.minutes(10)],
      ["2h", Duration.hours(2)],
      ["1d", Duration.days(1)],
      ["1.5h", Duration.minutes(90)],
      [" 90 s ", Duration.seconds(90)],
      ["90 seconds", Duration.seconds(90)],
      ["10 minutes", Duration.minutes(10)]
    ]
    for (const [text, expected] of cases) {
      const parsed = parseDuration(text)
      assert.isTrue(Option.isSome(parsed), text)
      assert.isTrue(Duration.equals(Option.getOrThrow(parsed), expected), text)
    }
    assert.strictEqual(normalizeDuration("10m"), "10 minutes")
  })

  it("refuses a bare number, an unknown unit, a negative or an overlong text", () => {
    for (const text of ["90", "10x", "-5s", "s", "", "9".repeat(80) + "s"]) {
      assert.isTrue(Option.isNone(parseDuration(text)), text)
      assert.isFalse(Schema.is(Schema.Duration)(Schema.decodeUnknownOption(DurationText)(text).pipe(Option.getOrUndefined)), text)
    }
    assert.isTrue(Duration.equals(Schema.decodeUnknownSync(DurationText)("10m"), Duration.minutes(10)))
  })
})
