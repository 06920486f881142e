/**
 * The operator token (the dev Core's "Core key"): the only credential the operator API accepts, and one the
 * machine routes never accept (they authenticate daemon credentials against stored device digests only, and
 * this token is never stored there).
 *
 * It is given explicitly (flag or environment, read in `src/bin`) or generated at first start into
 * `<data dir>/operator-token` with mode 0600 and reused afterwards. It stays `Redacted` everywhere; it is
 * never printed in a log line, and `agentwire core` prints only the file's path.
 */
import { Effect, Redacted, Schema } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** Prefix of every generated operator token (so a leaked one is recognizable and never mistaken for a daemon credential). */
export const OperatorTokenPrefix = "awop_"

/** The token file inside a data directory. */
export const tokenFile = (dataDir: string): string => join(dataDir, "operator-token")

/** The token file could not be read or written. */
export class OperatorTokenUnavailable extends Schema.TaggedError<OperatorTokenUnavailable>()("OperatorTokenUnavailable", {
  path: Schema.String,
  reason: Schema.Literals(["read_failed", "write_failed", "empty"])
}) {
  override get message() {
    return `operator token file ${this.path}: ${this.reason.replace("_", " ")}`
  }
}

/** A fresh random operator token. */
export const generate = (): Redacted.Redacted<string> =>
  Redacted.make(OperatorTokenPrefix + randomBytes(32).toString("base64url"))

/** Reads a token file (trimmed); an empty file is refused. */
export const readFile = (path: string): Effect.Effect<Redacted.Redacted<string>, OperatorTokenUnavailable> =>
  Effect.try({
    try: () => readFileSync(path, "utf8").trim(),
    catch: () => new OperatorTokenUnavailable({ path, reason: "read_failed" })
  }).pipe(
    Effect.flatMap((text) =>
      text.length === 0 ? Effect.fail(new OperatorTokenUnavailable({ path, reason: "empty" })) : Effect.succeed(Redacted.make(text))
    )
  )

/**
 * The data directory's token: read when the file exists, otherwise generated and written with mode 0600
 * (created exclusively, so two processes starting together never overwrite each other's token).
 */
export const loadOrCreate = (dataDir: string): Effect.Effect<Redacted.Redacted<string>, OperatorTokenUnavailable> => {
  const path = tokenFile(dataDir)
  return Effect.suspend(() => {
    if (existsSync(path)) return readFile(path)
    const token = generate()
    return Effect.try({
      try: () => {
        writeFileSync(path, Redacted.value(token) + "\n", { mode: 0o600, flag: "wx" })
        chmodSync(path, 0o600)
      },
      catch: () => new OperatorTokenUnavailable({ path, reason: "write_failed" })
    }).pipe(
      Effect.as(token),
      // Lost a creation race: the other process's token wins.
      Effect.catch((error) => (existsSync(path) ? readFile(path) : Effect.fail(error)))
    )
  })
}

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest()

/** Constant-time check of a presented bearer token against the operator token. */
export const matches = (expected: Redacted.Redacted<string>, presented: string): boolean =>
  timingSafeEqual(digest(Redacted.value(expected)), digest(presented))
