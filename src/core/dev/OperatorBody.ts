/**
 * An operator request's body and query (OperatorApi.ts): the body read within its size bound, parsed, held to the
 * wire's structural bound and strictly decoded; failures are `OperatorRequestInvalid` and never echo the body.
 */
import { ByteSize, Effect, Result, Schema } from "effect"
import { HttpIncomingMessage, type HttpServerRequest } from "effect/http"
import { JsonBounds, Limits } from "../../proto/index.js"
import { compileValidator } from "../../proto/internal/fastValidator.js"
import type { OperatorRequestInvalid } from "./OperatorErrors.js"
import { OperatorRequestInvalid as RequestInvalid } from "./OperatorErrors.js"

/** Request bodies larger than this are refused (inline images make inputs large; the wire frame is 4 MiB). */
export const MaxOperatorBodyBytes = 4 * 1024 * 1024

const strict = { onExcessProperty: "error" } as const

type BodyDecoder = (input: unknown) => Result.Result<unknown, Schema.SchemaError>

/**
 * One strict decoder per body schema, built at its first request (issue 18: not rebuilt per request). A schema
 * without transformations also gets the wire codec's compiled validator (`fastValidator.ts`, as frames do): a valid
 * body is checked in place and is its own decoded value; whatever it refuses goes to Schema's decoder, which
 * answers (so a refusal reads as before, and a body the validator is stricter about still decodes).
 */
const decoders = new WeakMap<Schema.Top, BodyDecoder>()
const decoderOf = (schema: Schema.Top): BodyDecoder => {
  let decoder = decoders.get(schema)
  if (decoder === undefined) {
    const decode = Schema.decodeUnknownResult(schema as unknown as Schema.Codec<unknown, unknown>, strict)
    const valid = compileValidator(schema.ast)
    decoder = valid === undefined ? decode : (input) => valid(input) ? Result.succeed(input) : decode(input)
    decoders.set(schema, decoder)
  }
  return decoder
}

const operatorBodySize = ByteSize.bytes(MaxOperatorBodyBytes)

/** The body's text as a JSON value within the structural bound, decoded by `decode`: one synchronous step. */
const decodeBody = <A>(text: string, decode: BodyDecoder): Effect.Effect<A, OperatorRequestInvalid> => {
  let body: unknown
  try {
    body = text.trim() === "" ? {} : JSON.parse(text)
  } catch {
    return Effect.fail(new RequestInvalid({ detail: "the body is not JSON" }))
  }
  // The same structural bound as a wire frame (JsonBounds.ts): nothing deeper reaches a schema or a Runtime.
  if (JsonBounds.checkJsonValue(body) !== undefined) {
    return Effect.fail(new RequestInvalid({
      detail: `the body nests deeper than ${Limits.MaxJsonDepth} levels or holds more than ${Limits.MaxJsonNodes} values`
    }))
  }
  const decoded = decode(body)
  return Result.isSuccess(decoded)
    ? Effect.succeed(decoded.success as A)
    : Effect.fail(new RequestInvalid({ detail: `the body does not match the schema: ${String(decoded.failure.message).slice(0, 300)}` }))
}

/**
 * Reads and strictly decodes a JSON body (at most 4 MiB, or `maxBytes`: a Session's initialization may carry
 * 16 MiB of bytes); a failure never echoes the body. The body is read in one Effect; parsing, the structural
 * bound and the decode are one synchronous step after it.
 */
export const readBody = <S extends Schema.Top>(
  request: HttpServerRequest.HttpServerRequest,
  schema: S,
  maxBytes: number = MaxOperatorBodyBytes
): Effect.Effect<S["Type"], OperatorRequestInvalid> => {
  const decode = decoderOf(schema)
  return request.text.pipe(
    Effect.matchEffect({
      onFailure: () => Effect.fail(new RequestInvalid({ detail: `the body could not be read (at most ${maxBytes / (1024 * 1024)} MiB)` })),
      onSuccess: (text) => decodeBody<S["Type"]>(text, decode)
    }),
    Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBytes === MaxOperatorBodyBytes ? operatorBodySize : ByteSize.bytes(maxBytes))
  )
}

/**
 * One query parameter of a request target, as `new URL(target).searchParams.get(name)` reads it; a target without a
 * query is answered without parsing a URL.
 */
export const queryParam = (target: string, name: string): string | null => {
  const start = target.indexOf("?")
  if (start < 0) return null
  const end = target.indexOf("#", start)
  return new URLSearchParams(end < 0 ? target.slice(start + 1) : target.slice(start + 1, end)).get(name)
}
