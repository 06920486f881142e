/**
 * MessageInput: the ordered message/content model shared by initial, prepared and active input
 * (`prompt_request.input`, `execution_start.input`, `prompt_steer.input`) and, as a plain content list, by
 * function results and tool observations. The schema fixes the exact member shapes; the cross-element rules
 * (non-empty, meaningful content, image profile) are the pure validators below, which both sides call and
 * which return a finite code. Order of messages and of parts is significant and is always preserved.
 */
import { Option, Schema } from "effect"
import { Base64 } from "effect/encoding"

export const InputText = Schema.Struct({ type: Schema.Literal("input_text"), text: Schema.String })
export type InputText = typeof InputText.Type
export const InputImage = Schema.Struct({ type: Schema.Literal("input_image"), image_url: Schema.String })
export type InputImage = typeof InputImage.Type
/** Exactly one of the two shapes; a part carrying both `text` and `image_url` is rejected by strict decoding. */
export const InputContent = Schema.Union([InputText, InputImage])
export type InputContent = typeof InputContent.Type
export const InputMessage = Schema.Struct({ content: Schema.Array(InputContent) })
export type InputMessage = typeof InputMessage.Type
export const MessageInput = Schema.Array(InputMessage)
export type MessageInput = typeof MessageInput.Type

/** Why a MessageInput is invalid. */
export type MessageInputIssue =
  | "empty_input" // no message at all
  | "empty_message" // a message with no part
  | "blank_image_url" // an image part whose url is blank after trimming
  | "no_content" // a message with no image and only empty text parts

/**
 * Validates a MessageInput (wire rule): at least one message, each with at least one part, no blank image
 * reference, and every message has an image or a text part that is not the empty string. Whitespace-only
 * text counts as content (the newer contract rule; see docs/wire-decisions.md).
 */
export const validateMessageInput = (input: MessageInput): Option.Option<MessageInputIssue> => {
  if (input.length === 0) return Option.some("empty_input")
  for (const message of input) {
    const issue = validateContent(message.content)
    if (issue !== undefined) return Option.some(issue)
  }
  return Option.none()
}

const validateContent = (content: ReadonlyArray<InputContent>): MessageInputIssue | undefined => {
  if (content.length === 0) return "empty_message"
  let meaningful = false
  for (const part of content) {
    if (part.type === "input_image") {
      if (part.image_url.trim().length === 0) return "blank_image_url"
      meaningful = true
    } else if (part.text.length > 0) meaningful = true
  }
  return meaningful ? undefined : "no_content"
}

/** Validates a content list used on its own (function results may be empty; parts must still be valid). */
export const validateContentParts = (content: ReadonlyArray<InputContent>): Option.Option<"blank_image_url"> => {
  for (const part of content) {
    if (part.type === "input_image" && part.image_url.trim().length === 0) return Option.some("blank_image_url")
  }
  return Option.none()
}

/** True when any message or part carries an image (Core then requires `message_images`). */
export const hasImages = (input: MessageInput): boolean =>
  input.some((message) => message.content.some((part) => part.type === "input_image"))

/** True when a content list carries an image (function results then require `function_result_images`). */
export const contentHasImages = (content: ReadonlyArray<InputContent>): boolean =>
  content.some((part) => part.type === "input_image")

// ---------------------------------------------------------------------------------------------- whitespace

/** The blank set: Go `unicode.IsSpace` united with ECMAScript `String.prototype.trim` whitespace. */
const BLANK = /^[\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF]*$/

/** True when a message has no image and no character outside the blank set (Harness admission rule). */
export const isWhitespaceOnlyMessage = (message: InputMessage): boolean =>
  message.content.every((part) => part.type === "input_text" && BLANK.test(part.text))

// ---------------------------------------------------------------------------------------------- images

/** Why an inline image fails the public image profile. */
export type ImageIssue = "image_media_type" | "image_base64" | "image_format_mismatch"

const PNG_PREFIX = "data:image/png;base64,"
const JPEG_PREFIX = "data:image/jpeg;base64,"
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

const isPng = (bytes: Uint8Array) =>
  bytes.length >= 24 &&
  PNG_SIGNATURE.every((b, i) => bytes[i] === b) &&
  // the first chunk is IHDR
  bytes[12] === 0x49 && bytes[13] === 0x48 && bytes[14] === 0x44 && bytes[15] === 0x52

const isJpeg = (bytes: Uint8Array) => bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff

/**
 * The public inline image profile: `data:image/png;base64,…` or `data:image/jpeg;base64,…` (exact lower-case
 * prefixes), canonical standard padded base64 that re-encodes to the same text, not empty, and decoded bytes
 * that really are that format. Remote URLs and other media types are unqualified.
 */
export const validateInlineImage = (imageUrl: string): Option.Option<ImageIssue> => {
  const format = imageUrl.startsWith(PNG_PREFIX) ? "png" : imageUrl.startsWith(JPEG_PREFIX) ? "jpeg" : undefined
  if (format === undefined) return Option.some("image_media_type")
  const encoded = imageUrl.slice(format === "png" ? PNG_PREFIX.length : JPEG_PREFIX.length)
  if (encoded.length === 0 || encoded.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) {
    return Option.some("image_base64")
  }
  const decoded = Base64.decode(encoded)
  if (decoded._tag === "Failure" || Base64.encode(decoded.success) !== encoded) return Option.some("image_base64")
  const bytes = decoded.success
  const ok = format === "png" ? isPng(bytes) : isJpeg(bytes)
  return ok ? Option.none() : Option.some("image_format_mismatch")
}

/** Validates every image part of a MessageInput against the inline profile. */
export const validateInlineImages = (input: MessageInput): Option.Option<ImageIssue> => {
  for (const message of input) {
    for (const part of message.content) {
      if (part.type === "input_image") {
        const issue = validateInlineImage(part.image_url)
        if (Option.isSome(issue)) return issue
      }
    }
  }
  return Option.none()
}

// ---------------------------------------------------------------------------------------------- text-only transports

/**
 * Joins a MessageInput for a text-only native transport: messages with a blank line, parts of one message
 * without a separator. An image is rejected, never dropped.
 */
export const toPlainText = (input: MessageInput): Option.Option<string> => {
  const messages: Array<string> = []
  for (const message of input) {
    let text = ""
    for (const part of message.content) {
      if (part.type === "input_image") return Option.none()
      text += part.text
    }
    messages.push(text)
  }
  return Option.some(messages.join("\n\n"))
}

/** A one-message text input (tests, demos, the scripted harness). */
export const text = (value: string): MessageInput => [{ content: [{ type: "input_text", text: value }] }]
