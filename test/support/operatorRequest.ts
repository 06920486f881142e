/**
 * The operator API client of the in-process dev Core tests: one request as an Effect, with the bearer from the
 * test's token (or `token: ""` for none, or another token). A `string` body is sent as it is (for malformed JSON);
 * anything else as JSON. The answer keeps the raw bytes, the text, and the parsed JSON (`undefined` when the body
 * is empty or not JSON).
 */
import { Effect, Redacted } from "effect"

export interface OperatorAnswer {
  readonly status: number
  readonly raw: Buffer
  readonly text: string
  readonly body: any
}

export type OperatorCall = (method: string, path: string, body?: unknown, options?: { readonly token?: string }) => Effect.Effect<OperatorAnswer>

export const operatorRequest = (url: string, token: Redacted.Redacted<string>): OperatorCall => (method, path, body, options = {}) =>
  Effect.promise(async () => {
    const bearer = options.token ?? Redacted.value(token)
    const res = await fetch(`${url}/api/v1/operator${path}`, {
      method,
      headers: { ...(bearer === "" ? {} : { authorization: `Bearer ${bearer}` }), "content-type": "application/json" },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
    })
    const raw = Buffer.from(await res.arrayBuffer())
    const text = raw.toString("utf8")
    let parsed: unknown = undefined
    try {
      parsed = text === "" ? undefined : JSON.parse(text)
    } catch {
      parsed = undefined
    }
    return { status: res.status, raw, text, body: parsed }
  })
