/**
 * Fingerprints of decoded peer values for duplicate detection and Executor reuse: SHA-256 over the canonical
 * encoding (`Canonical.canonicalJson`), never over raw frame text.
 *
 * `fingerprint` hashes the canonical encoding as it walks the value, except that a long string (≥ 256 code
 * units, well-formed UTF-16) is hashed as its raw text behind a marker — U+0000, its length in code units, `:` —
 * instead of as its JSON escape: escaping a Turn's 600 KB input cost more than hashing it (issue 18, relay).
 * The canonical text never contains a raw U+0000 (JSON escapes every control character), and the length bounds
 * the raw text (well-formed, so its UTF-8 decodes back unambiguously), so the hashed bytes still determine the
 * canonical encoding: two values have the same fingerprint exactly when their canonical encodings are equal.
 * A fingerprint is only ever compared with another computed here, in this process.
 */
import { createHash, type Hash } from "node:crypto"
import { omitKeys, walkCanonical } from "../proto/Canonical.js"
import type { PromptRequestPayload } from "../proto/Execution.js"

/** Strings at least this long (and well-formed) are hashed raw rather than as their JSON escape. */
const RawStringMin = 256

const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed: () => boolean }).isWellFormed()

/** Feeds `value`'s canonical encoding to `hash` (long strings raw, see the module comment). */
const hashCanonical = (hash: Hash, value: unknown): void => {
  let out: Array<string> = []
  walkCanonical(
    value,
    (text) => {
      out.push(text)
    },
    (scalar) => {
      if (typeof scalar !== "string" || scalar.length < RawStringMin || !isWellFormed(scalar)) return false
      if (out.length > 0) hash.update(out.join(""))
      out = []
      hash.update(`\u0000${scalar.length}:`)
      hash.update(scalar)
      return true
    }
  )
  if (out.length > 0) hash.update(out.join(""))
}

/** SHA-256 of the canonical encoding of a decoded value (never of raw frame text), in hex. */
export const fingerprint = (value: unknown): string => {
  const hash = createHash("sha256")
  hashCanonical(hash, value)
  return hash.digest("hex")
}

/** SHA-256 of a text that already is a canonical encoding (e.g. `Steering.steerFingerprint`), in hex. */
export const digest = (canonical: string): string => createHash("sha256").update(canonical).digest("hex")

/** The Executor reuse key: the configuration without its per-Turn members. */
export const configurationFingerprint = (config: PromptRequestPayload): string =>
  fingerprint(
    omitKeys(config, ["run_id", "input", "agent_session_id", "require_existing_native_session", "release_on_completion"])
  )
