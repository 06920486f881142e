/**
 * Bearer secrets of a Session's MCP servers, encrypted at rest (issue #14; protocol "MCP connection authority").
 *
 * - The key: 32 random bytes in `<data dir>/mcp-secrets.key`, created on the first secret stored. It is written
 *   to a temporary file opened `wx` with mode 0600 (so it is never readable by others, not even for a moment),
 *   synced, then linked to its final name (the link fails if another key appeared meanwhile: that one wins), so
 *   a key file is either absent or complete. A key file that others can read (mode & 0o077), or that is not 32
 *   bytes, is refused (`key_invalid`), never used.
 * - Each secret: AES-256-GCM with a fresh random 96-bit nonce, the Session id and the server's position as
 *   additional data (a row copied to another Session or position does not decrypt), stored in
 *   `session_mcp_secrets` (migration 9) as base64 nonce, ciphertext and tag. The Session's stored configuration
 *   keeps only `bearer_set: true`.
 * - Decrypted only when a Turn's execution spec is built (Turns, Recovery), into `Redacted` values the request
 *   builder puts in `bearer_token`; never returned by the operator API, logged or put in an error: errors carry
 *   a reason and the key file's name only.
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"

export const KeyFileName = "mcp-secrets.key"
const KeyBytes = 32
const NonceBytes = 12

/** A bearer secret could not be stored or read back. Never carries the secret, the key or a ciphertext. */
export class McpSecretUnavailable extends Schema.TaggedError<McpSecretUnavailable>()("McpSecretUnavailable", {
  reason: Schema.Literals(["key_missing", "key_invalid", "key_unreadable", "key_create_failed", "secret_missing", "decrypt_failed", "store_failed"])
}) {
  override get message() {
    switch (this.reason) {
      case "key_missing":
        return `the MCP secret key ${KeyFileName} is missing from the data directory: stored bearer secrets cannot be decrypted (restore the key file, or recreate the Session)`
      case "key_invalid":
        return `the MCP secret key ${KeyFileName} is invalid (it must be 32 bytes and readable by its owner only, mode 0600)`
      case "key_unreadable":
        return `the MCP secret key ${KeyFileName} cannot be read`
      case "key_create_failed":
        return `the MCP secret key ${KeyFileName} cannot be created in the data directory`
      case "secret_missing":
        return "a bearer secret of the Session's MCP servers is missing from the store"
      case "decrypt_failed":
        return `a bearer secret of the Session does not decrypt with ${KeyFileName} (a different or damaged key)`
      case "store_failed":
        return "the store could not keep or read a bearer secret"
    }
  }
}

const fail = (reason: McpSecretUnavailable["reason"]) => new McpSecretUnavailable({ reason })

/** Reads the key; `key_missing` when there is none. */
const readKey = (path: string): Effect.Effect<Buffer, McpSecretUnavailable> =>
  Effect.tryPromise({
    try: async () => {
      const stat = await Fs.stat(path)
      if ((stat.mode & 0o077) !== 0 || stat.size !== KeyBytes || !stat.isFile()) return "invalid" as const
      const key = await Fs.readFile(path)
      return key.length === KeyBytes ? key : "invalid" as const
    },
    catch: (e) => fail((e as NodeJS.ErrnoException).code === "ENOENT" ? "key_missing" : "key_unreadable")
  }).pipe(Effect.flatMap((k) => (k === "invalid" ? Effect.fail(fail("key_invalid")) : Effect.succeed(k))))

/** Creates the key atomically with mode 0600 (temporary file, sync, link); an existing key wins. */
const createKey = (path: string): Effect.Effect<void, McpSecretUnavailable> => {
  const temp = `${path}.${process.pid}.${Crypto.randomBytes(6).toString("hex")}.tmp`
  return Effect.acquireUseRelease(
    Effect.tryPromise({ try: () => Fs.open(temp, "wx", 0o600), catch: () => fail("key_create_failed") }),
    (handle) =>
      Effect.tryPromise({
        try: async () => {
          await handle.writeFile(Crypto.randomBytes(KeyBytes))
          await handle.sync()
          await Fs.link(temp, path).catch((e: NodeJS.ErrnoException) => (e.code === "EEXIST" ? undefined : Promise.reject(e)))
        },
        catch: () => fail("key_create_failed")
      }),
    (handle) => Effect.promise(() => handle.close().catch(() => undefined).then(() => Fs.rm(temp, { force: true })))
  )
}

const additionalData = (sessionId: string, index: number) => Buffer.from(`agentwire-mcp-bearer:v1:${sessionId}:${index}`, "utf8")

/** One sealed secret as stored. */
interface Sealed {
  readonly nonce: string
  readonly ciphertext: string
  readonly tag: string
}

export const seal = (key: Buffer, sessionId: string, index: number, secret: Redacted.Redacted<string>): Sealed => {
  const nonce = Crypto.randomBytes(NonceBytes)
  const cipher = Crypto.createCipheriv("aes-256-gcm", key, nonce)
  cipher.setAAD(additionalData(sessionId, index))
  const ciphertext = Buffer.concat([cipher.update(Redacted.value(secret), "utf8"), cipher.final()])
  return { nonce: nonce.toString("base64"), ciphertext: ciphertext.toString("base64"), tag: cipher.getAuthTag().toString("base64") }
}

export const open = (key: Buffer, sessionId: string, index: number, sealed: Sealed): Effect.Effect<Redacted.Redacted<string>, McpSecretUnavailable> =>
  Effect.try({
    try: () => {
      const decipher = Crypto.createDecipheriv("aes-256-gcm", key, Buffer.from(sealed.nonce, "base64"))
      decipher.setAAD(additionalData(sessionId, index))
      decipher.setAuthTag(Buffer.from(sealed.tag, "base64"))
      return Redacted.make(Buffer.concat([decipher.update(Buffer.from(sealed.ciphertext, "base64")), decipher.final()]).toString("utf8"))
    },
    catch: () => fail("decrypt_failed")
  })

export interface McpSecretsShape {
  /** Encrypts and stores the secrets of a new Session (inside the caller's transaction); creates the key if needed. */
  readonly store: (
    sessionId: string,
    secrets: ReadonlyArray<{ readonly index: number; readonly secret: Redacted.Redacted<string> }>
  ) => Effect.Effect<void, McpSecretUnavailable>
  /** The decrypted secrets of a Session by server position (only the positions marked `bearer_set`). */
  readonly open: (sessionId: string, indexes: ReadonlyArray<number>) => Effect.Effect<ReadonlyMap<number, Redacted.Redacted<string>>, McpSecretUnavailable>
}

export class McpSecrets extends Context.Service<McpSecrets, McpSecretsShape>()("agentwire/core/dev/McpSecrets") {}

/** The secrets of the store in `SqlClient`, under the key file in `dataDir`. */
export const layer = (dataDir: string): Layer.Layer<McpSecrets, never, SqlClient.SqlClient> =>
  Layer.effect(
    McpSecrets,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const path = Path.join(dataDir, KeyFileName)
      let cached: Buffer | undefined
      const key = (create: boolean): Effect.Effect<Buffer, McpSecretUnavailable> =>
        cached !== undefined
          ? Effect.succeed(cached)
          : readKey(path).pipe(
            Effect.catchIf((e) => create && e.reason === "key_missing", () => Effect.andThen(createKey(path), readKey(path))),
            Effect.tap((k) => Effect.sync(() => (cached = k)))
          )
      return McpSecrets.of({
        store: (sessionId, secrets) =>
          secrets.length === 0 ? Effect.void : Effect.gen(function* () {
            const k = yield* key(true)
            for (const s of secrets) {
              const sealed = seal(k, sessionId, s.index, s.secret)
              yield* sql`INSERT INTO session_mcp_secrets ${
                sql.insert({ session_id: sessionId, server_index: s.index, nonce: sealed.nonce, ciphertext: sealed.ciphertext, tag: sealed.tag })
              }`.pipe(Effect.mapError(() => fail("store_failed")))
            }
          }),
        open: (sessionId, indexes) =>
          indexes.length === 0 ? Effect.succeed(new Map()) : Effect.gen(function* () {
            const rows = yield* sql`SELECT server_index, nonce, ciphertext, tag FROM session_mcp_secrets WHERE session_id = ${sessionId}`.pipe(
              Effect.mapError(() => fail("store_failed"))
            )
            const k = yield* key(false)
            const out = new Map<number, Redacted.Redacted<string>>()
            for (const index of indexes) {
              const row = rows.find((r) => Number(r.server_index) === index)
              if (row === undefined) return yield* fail("secret_missing")
              out.set(index, yield* open(k, sessionId, index, { nonce: String(row.nonce), ciphertext: String(row.ciphertext), tag: String(row.tag) }))
            }
            return out
          })
      })
    })
  )

/**
 * The decrypted bearer secrets of a stored configuration's servers marked `bearer_set`, by position. Without
 * the service (a Core built without it) a marked server is `secret_missing`: never sent without its secret.
 */
export const sessionBearers = (
  secrets: Option.Option<McpSecretsShape>,
  sessionId: string,
  indexes: ReadonlyArray<number>
): Effect.Effect<ReadonlyMap<number, Redacted.Redacted<string>>, McpSecretUnavailable> =>
  indexes.length === 0
    ? Effect.succeed(new Map())
    : Option.match(secrets, { onNone: () => Effect.fail(fail("secret_missing")), onSome: (s) => s.open(sessionId, indexes) })
