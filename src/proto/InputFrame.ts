/**
 * A request whose input (`MessageInput`: `execution_start`, `prompt_request`, `prompt_steer`) carries a long text,
 * written as the frame's UTF-8 bytes without `JSON.stringify` escaping that text and without a flat copy of the
 * frame's text (issue 18, relay: each Turn's `execution_start` carries the scripted harness's 560 KB script, whose
 * only escapes are its quotes; on this VM each new string or buffer of that size costs its page faults, about
 * 2.5 µs per KiB). The bytes are exactly the UTF-8 of `Messages.encodeMessage`'s text, and a message the codec
 * refuses is refused the same way (`test/proto/InputFrame.test.ts`). It never sends and never changes a message.
 */
import { Result } from "effect"
import { utf8ByteLength } from "./Checks.js"
import { MaxFrameBytes } from "./Limits.js"
import { encodeMessage, type Message, type OutgoingFrameRejected } from "./Messages.js"
import { aroundMarkers, isPlainButQuotes, Marker, type Splice, spliceBytes, spliceOf } from "./PlainText.js"

/** An `input_text` at least this long (UTF-16 units) is written from its bytes (`encodeMessageBytes`). */
export const LongText = 16_384

interface Part {
  readonly type: string
  readonly text?: unknown
}

/** The requests whose payload's `input` is a `MessageInput` (a plain schema: any string is a valid text). */
const WithInput: ReadonlySet<string> = new Set(["execution_start", "prompt_request", "prompt_steer"])

/**
 * The message with each long text replaced by `Marker` (`texts`; with `any`, every long text, else only those that
 * only quotes would escape), or undefined when there is none.
 */
const probeOf = (message: Message, texts: Array<string>, any = false): Message | undefined => {
  if (!WithInput.has(message.type)) return undefined
  const payload = (message as { readonly payload?: { readonly input?: unknown } }).payload
  const input = payload?.input
  if (!Array.isArray(input)) return undefined
  let replaced = false
  const probeInput = input.map((m: unknown) => {
    const content = (m as { readonly content?: unknown } | null)?.content
    if (!Array.isArray(content)) return m
    let changed = false
    const parts = content.map((part: Part | null) => {
      const text = part?.text
      if (part?.type !== "input_text" || typeof text !== "string" || text.length < LongText || (!any && !isPlainButQuotes(text))) {
        return part
      }
      changed = true
      texts.push(text)
      return { ...part, text: Marker }
    })
    if (!changed) return m
    replaced = true
    return { ...(m as object), content: parts }
  })
  return replaced ? ({ ...message, payload: { ...payload, input: probeInput } } as unknown as Message) : undefined
}

/**
 * The probe (the message with each long text that only quotes would escape replaced by one NUL) goes through the
 * codec: a text never takes part in a rule of the codec but the 4 MiB bound, and each NUL is written as the token
 * `"\u0000"`, so the frame is the probe's text with each such token (when there are exactly as many as texts) replaced
 * by the text between quotes with each quote escaped, which is what `JSON.stringify` writes for it. Anything else
 * (no such text, a refused probe, a token count that differs, a frame over 4 MiB) is the codec's answer.
 */
const planOf = (message: Message): Splice | Result.Result<string, OutgoingFrameRejected> => {
  const texts: Array<string> = []
  const probe = probeOf(message, texts)
  if (probe === undefined) return encodeMessage(message)
  const encoded = encodeMessage(probe)
  if (Result.isFailure(encoded)) return encodeMessage(message)
  const pieces = aroundMarkers(encoded.success, texts.length)
  if (pieces === undefined) return encodeMessage(message)
  const plan = spliceOf(pieces, texts.map((text) => [text]))
  return plan.size > MaxFrameBytes ? encodeMessage(message) : plan
}

const isPlan = (plan: Splice | Result.Result<string, OutgoingFrameRejected>): plan is Splice => "pieces" in plan

/**
 * Encodes one message as `Messages.encodeMessage` does (every rule of the codec; the same refusal for a message it
 * refuses): as UTF-8 bytes when its input has a text of at least `LongText` units without a backslash, control
 * character or surrogate (`planOf`), otherwise as the codec's text.
 */
export const encodeMessageBytes = (message: Message): Result.Result<string | Uint8Array, OutgoingFrameRejected> => {
  const plan = planOf(message)
  return isPlan(plan) ? Result.succeed(spliceBytes(plan)) : plan
}

/**
 * The codec's verdict on a message (`Messages.encodeMessage`) without writing or scanning its long input texts: the
 * probe with every long text replaced goes through the codec, and a text of n units takes at most 6n bytes between
 * its quotes (`\u00XX`), so a frame whose bound is within 4 MiB is within it; otherwise the codec answers.
 */
export const checkMessage = (message: Message): Result.Result<void, OutgoingFrameRejected> => {
  const texts: Array<string> = []
  const probe = probeOf(message, texts, true)
  const encoded = probe === undefined ? encodeMessage(message) : encodeMessage(probe)
  if (Result.isFailure(encoded)) return probe === undefined ? Result.fail(encoded.failure) : Result.map(encodeMessage(message), () => undefined)
  if (probe === undefined) return Result.succeed(undefined)
  let bound = utf8ByteLength(encoded.success)
  for (const text of texts) bound += 6 * text.length
  return bound <= MaxFrameBytes ? Result.succeed(undefined) : Result.map(encodeMessage(message), () => undefined)
}
