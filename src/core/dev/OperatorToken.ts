/**
 * The operator token (the dev Core's "Core key"): the only credential the operator API accepts, and one the
 * machine routes never accept (they authenticate daemon credentials against stored device digests only, and
 * this token is never stored there).
 *
 * It is given explicitly (flag or environment, read in `src/bin`) or generated at first start into
 * `<data dir>/operator-token` with mode 0600 and reused afterwards. It stays `Redacted` everywhere; it is
 * never printed in a log line, and `agentwire core` prints only the file's path.
 */
import { Effect, FileSystem, Redacted, Schema } from "effect"
import { hash, randomBytes, timingSafeEqual } from "node:crypto"
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
export const readFile = (
  path: string
): Effect.Effect<Redacted.Redacted<string>, OperatorTokenUnavailable, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError(() => new OperatorTokenUnavailable({ path, reason: "read_failed" }))
    )
    const token = text.trim()
    if (token.length === 0) return yield* new OperatorTokenUnavailable({ path, reason: "empty" })
    return Redacted.make(token)
  })

/**
 * The data directory's token: read when the file exists, otherwise generated and written with mode 0600
 * (created exclusively, so two processes starting together never overwrite each other's token).
 */
export const loadOrCreate = (
  dataDir: string
): Effect.Effect<Redacted.Redacted<string>, OperatorTokenUnavailable, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = tokenFile(dataDir)
    const exists = fs.exists(path).pipe(Effect.orElseSucceed(() => false))
    if (yield* exists) return yield* readFile(path)
    const token = generate()
    const written = yield* Effect.result(
      fs.writeFileString(path, Redacted.value(token) + "\n", { flag: "wx", mode: 0o600 }).pipe(
        // The mode of a new file is subject to the umask; set it exactly.
        Effect.andThen(fs.chmod(path, 0o600))
      )
    )
    if (written._tag === "Success") return token
    // Lost a creation race: the other process's token wins.
    if (yield* exists) return yield* readFile(path)
    return yield* new OperatorTokenUnavailable({ path, reason: "write_failed" })
  })

/** SHA-256 of the UTF-8 bytes, one-shot (`crypto.hash`: no Hash object per request). */
const digest = (value: string): Buffer => hash("sha256", value, "buffer")

/** Constant-time check of a presented bearer token against the operator token. */
export const matches = (expected: Redacted.Redacted<string>, presented: string): boolean =>
  timingSafeEqual(digest(Redacted.value(expected)), digest(presented))

/**
 * `matches` against one operator token, its digest taken once (issue 18: one hash per request, not two); the
 * check stays constant-time.
 */
export const matcher = (expected: Redacted.Redacted<string>): (presented: string) => boolean => {
  const want = digest(Redacted.value(expected))
  return (presented) => timingSafeEqual(want, digest(presented))
}
