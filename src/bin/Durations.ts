/**
 * Durations on the command line and in the environment: the short forms operators type (`500ms`, `90s`,
 * `10m`, `2h`, `1d`, also `1.5h`) and Effect's long form (`90 seconds`, `10 minutes`). A bare number is refused
 * (its unit would be a guess).
 */
import { Duration, Effect, Option, Schema, SchemaIssue, SchemaTransformation } from "effect"

const Units: Record<string, string> = { ms: "millis", s: "seconds", m: "minutes", h: "hours", d: "days" }

/** `90s` → `90 seconds`; anything else unchanged (trimmed). */
export const normalizeDuration = (text: string): string => {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(text.trim())
  return match === null ? text.trim() : `${match[1]} ${Units[match[2]!]}`
}

/** Parses a duration text; `None` when it is not one. */
export const parseDuration = (text: string): Option.Option<Duration.Duration> =>
  text.length > 64 ? Option.none() : Duration.fromInput(normalizeDuration(text) as Duration.Input)

/** A string schema decoding to a Duration (for `Flag.withSchema`). */
export const DurationText = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Duration,
    SchemaTransformation.transformEffect<Duration.Duration, string>({
      decode: (text, options) =>
        Option.match(parseDuration(text), {
          onNone: () =>
            Effect.fail(new SchemaIssue.InvalidValue({ expected: "a duration such as 90s, 10m, 2h or \"90 seconds\"" }, text, options)),
          onSome: Effect.succeed
        }),
      encode: (duration) => Effect.succeed(Duration.format(duration))
    })
  )
)
