/**
 * Fingerprints of decoded peer values for duplicate detection and Executor reuse: SHA-256 over the canonical
 * encoding (`Canonical.canonicalJson`), never over raw frame text.
 */
import { createHash } from "node:crypto"
import { canonicalJson, omitKeys } from "../proto/Canonical.js"
import type { PromptRequestPayload } from "../proto/Execution.js"

/** SHA-256 of the canonical encoding of a decoded value (never of raw frame text). */
export const fingerprint = (value: unknown): string => createHash("sha256").update(canonicalJson(value)).digest("hex")

/** SHA-256 of a text that already is a canonical encoding (e.g. `Steering.steerFingerprint`), in hex. */
export const digest = (canonical: string): string => createHash("sha256").update(canonical).digest("hex")

/** The Executor reuse key: the configuration without its per-Turn members. */
export const configurationFingerprint = (config: PromptRequestPayload): string =>
  fingerprint(
    omitKeys(config, ["run_id", "input", "agent_session_id", "require_existing_native_session", "release_on_completion"])
  )

