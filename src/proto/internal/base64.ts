/**
 * Strict standard padded base64 (RFC 4648 §4) for the transfer chunks: one pass, no regular expression.
 *
 * A text is accepted exactly when it is the canonical encoding of its bytes: length a multiple of 4, only the
 * standard alphabet, `=` only as the last one or two characters, and zero bits in the last character before the
 * padding. Two implementations with the same answers (`test/proto/Base64.property.test.ts` checks both against
 * the slow oracle: pattern, Effect's decoder and re-encoding):
 *
 * - **native**, where the host has Node's `Buffer` (the daemon, the gateway): decode with `Buffer.from` (lenient)
 *   and accept only when re-encoding gives the text back, which is exact whatever the lenient decoder skipped or
 *   guessed: a text equal to the canonical encoding of some bytes decodes strictly to those bytes. About 15 µs
 *   for a 64 KiB chunk.
 * - **portable**, elsewhere (the proto library in a browser): a table-driven loop that validates while it
 *   decodes (about 100 µs for 64 KiB), and an encoder that fills an ASCII byte array and decodes it as text.
 *
 * `src/proto` imports only `effect`: the native codec is found on `globalThis` at module load, never imported.
 */

const Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// Per position in a group of four, the character's 6 bits already shifted into place; an invalid character
// (or any code unit over 255, masked away by the `> 255` check) sets the sign bit.
const Invalid = -1 << 24
const position = (shift: number): Int32Array => {
  const table = new Int32Array(256).fill(Invalid)
  for (let i = 0; i < 64; i++) table[Alphabet.charCodeAt(i)] = i << shift
  return table
}
const D0 = position(18)
const D1 = position(12)
const D2 = position(6)
const D3 = position(0)

/** Portable strict decode: the bytes, or undefined when the text is not canonical padded base64. */
export const decodeStrictPortable = (data: string): Uint8Array | undefined => {
  const n = data.length
  if (n % 4 !== 0) return undefined
  if (n === 0) return new Uint8Array(0)
  const pad = data.charCodeAt(n - 1) === 61 ? (data.charCodeAt(n - 2) === 61 ? 2 : 1) : 0
  const out = new Uint8Array((n / 4) * 3 - pad)
  const full = pad === 0 ? n : n - 4
  let bad = 0
  let o = 0
  for (let i = 0; i < full; i += 4) {
    const a = data.charCodeAt(i)
    const b = data.charCodeAt(i + 1)
    const c = data.charCodeAt(i + 2)
    const d = data.charCodeAt(i + 3)
    const v = D0[a & 255]! | D1[b & 255]! | D2[c & 255]! | D3[d & 255]!
    bad |= v | ((a | b | c | d) > 255 ? Invalid : 0)
    out[o] = v >> 16
    out[o + 1] = v >> 8
    out[o + 2] = v
    o += 3
  }
  if (bad < 0) return undefined
  if (pad !== 0) {
    const a = data.charCodeAt(full)
    const b = data.charCodeAt(full + 1)
    // With one `=` the third character carries bits; with two it is the first `=`.
    const c = pad === 1 ? data.charCodeAt(full + 2) : 65
    if ((a | b | c) > 255) return undefined
    const v = D0[a]! | D1[b]! | D2[c]!
    if (v < 0) return undefined
    // Canonical: the bits that encode no byte are zero.
    if (pad === 2 ? (v & 0xffff) !== 0 : (v & 0xff) !== 0) return undefined
    out[o] = v >> 16
    if (pad === 1) out[o + 1] = v >> 8
  }
  return out
}

const AlphabetCodes = Uint8Array.from(Alphabet, (c) => c.charCodeAt(0))
// Two output characters per 12 bits, little-endian in a 16-bit cell (first character in the low byte).
const Pairs = new Uint16Array(4096).map((_, i) => AlphabetCodes[i >> 6]! | (AlphabetCodes[i & 63]! << 8))
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1
const asciiDecoder = new TextDecoder("utf-8")

/** Portable encode: standard padded base64 of `bytes`. */
export const encodePortable = (bytes: Uint8Array): string => {
  const n = bytes.length
  const buffer = new ArrayBuffer(Math.ceil(n / 3) * 4)
  const out = new Uint8Array(buffer)
  let i = 0
  let o = 0
  if (littleEndian) {
    const pairs = new Uint16Array(buffer, 0, buffer.byteLength >> 1)
    for (; i + 2 < n; i += 3) {
      const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
      pairs[o] = Pairs[v >> 12]!
      pairs[o + 1] = Pairs[v & 4095]!
      o += 2
    }
    o *= 2
  } else {
    for (; i + 2 < n; i += 3) {
      const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
      out[o] = AlphabetCodes[v >> 18]!
      out[o + 1] = AlphabetCodes[(v >> 12) & 63]!
      out[o + 2] = AlphabetCodes[(v >> 6) & 63]!
      out[o + 3] = AlphabetCodes[v & 63]!
      o += 4
    }
  }
  if (i < n) {
    const two = i + 1 < n
    const v = (bytes[i]! << 16) | (two ? bytes[i + 1]! << 8 : 0)
    out[o] = AlphabetCodes[v >> 18]!
    out[o + 1] = AlphabetCodes[(v >> 12) & 63]!
    out[o + 2] = two ? AlphabetCodes[(v >> 6) & 63]! : 61
    out[o + 3] = 61
  }
  return asciiDecoder.decode(out)
}

/** The part of Node's `Buffer` this module uses, looked up on `globalThis` (never imported). */
interface NativeBuffer {
  from(data: string, encoding: "base64"): Uint8Array & { toString(encoding: "base64"): string }
  from(buffer: ArrayBufferLike, byteOffset: number, length: number): { toString(encoding: "base64" | "latin1"): string }
}
const nativeBuffer: NativeBuffer | undefined = (() => {
  const candidate = (globalThis as { readonly Buffer?: unknown }).Buffer
  if (typeof candidate !== "function" || typeof (candidate as { from?: unknown }).from !== "function") return undefined
  try {
    const probe = (candidate as unknown as NativeBuffer).from("+/8=", "base64")
    return probe.length === 2 && probe[0] === 0xfb && probe[1] === 0xff && probe.toString("base64") === "+/8="
      ? (candidate as unknown as NativeBuffer)
      : undefined
  } catch {
    return undefined
  }
})()


/** Native strict decode: lenient `Buffer.from`, accepted only when the text is the encoding of the result. */
const decodeStrictNative = (native: NativeBuffer) => (data: string): Uint8Array | undefined => {
  if (data.length % 4 !== 0) return undefined
  const decoded = native.from(data, "base64")
  if (decoded.toString("base64") !== data) return undefined
  // Node hands out smaller results (under 32 KiB on Node 24) as views into a shared pool: those are copied, so no
  // caller ever holds a view whose `buffer` reaches other data. A 64 KiB chunk owns its whole buffer.
  return decoded.byteOffset === 0 && decoded.buffer.byteLength === decoded.byteLength
    ? new Uint8Array(decoded.buffer, 0, decoded.byteLength)
    : new Uint8Array(decoded)
}

const encodeNative = (native: NativeBuffer) => (bytes: Uint8Array): string =>
  native.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64")

/** Strict decode (native where the host has it, portable otherwise). */
export const decodeStrict: (data: string) => Uint8Array | undefined = nativeBuffer === undefined
  ? decodeStrictPortable
  : decodeStrictNative(nativeBuffer)

/** Standard padded base64 (native where the host has it, portable otherwise). */
export const encode: (bytes: Uint8Array) => string = nativeBuffer === undefined
  ? encodePortable
  : encodeNative(nativeBuffer)

/**
 * Strict decode of the base64 text held as bytes in `bytes[start, end)` (a chunk's `data` inside a received frame),
 * without decoding the frame to text: the bytes are read as Latin-1 (one character per byte, so a byte outside
 * ASCII becomes a character outside the alphabet and is refused) and decoded like `decodeStrict`. Undefined when
 * the text is not canonical padded base64, and always on a host without Node's `Buffer` (the caller then decodes
 * the frame the generic way).
 */
export const decodeStrictAscii: (bytes: Uint8Array, start: number, end: number) => Uint8Array | undefined =
  nativeBuffer === undefined
    ? () => undefined
    : ((native: NativeBuffer) => {
      const decode = decodeStrictNative(native)
      return (bytes: Uint8Array, start: number, end: number) =>
        decode(native.from(bytes.buffer, bytes.byteOffset + start, end - start).toString("latin1"))
    })(nativeBuffer)

/** Which implementation this host uses (for tests and diagnostics). */
export const implementation: "native" | "portable" = nativeBuffer === undefined ? "portable" : "native"
