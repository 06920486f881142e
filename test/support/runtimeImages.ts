/**
 * Inline images for the Runtime's tests of the public image profile (`MessageInput.validateInlineImage`):
 * one that meets it and some that do not. The profile itself is tested in test/proto/MessageInput.test.ts.
 */
import { Buffer } from "node:buffer"

/** A JFIF byte string (SOI, an APP0 JFIF segment, EOI) as a `data:image/jpeg;base64,` URL: meets the profile. */
export const validJpeg = `data:image/jpeg;base64,${
  Buffer.from([
    0xff, 0xd8,
    0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00,
    0xff, 0xd9
  ]).toString("base64")
}`

/** Declared as PNG, but the bytes are not a PNG (`image_format_mismatch`). */
export const notAPng = "data:image/png;base64,AA=="

/** A remote reference: not an inline image at all (`image_media_type`). */
export const remoteImage = "https://example.com/cat.png"
