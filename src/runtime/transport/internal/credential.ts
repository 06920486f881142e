/**
 * The one place the daemon credential leaves `Redacted`: the value of an `Authorization` header. Bootstrap and
 * the WebSocket dial both call it; nothing else unwraps the credential, and its result is handed straight to
 * the HTTP request and never stored, logged or put in an error.
 */
import { Redacted } from "effect"

/** `Bearer <credential>`: the prefix is exactly "Bearer " (capital B, one space), as Core requires. */
export const bearerAuthorization = (credential: Redacted.Redacted<string>): string => `Bearer ${Redacted.value(credential)}`
