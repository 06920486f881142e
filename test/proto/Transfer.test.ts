/**
 * Shared transfer rules (`Transfer`): chunk offsets, sizes and bounds, commits, canonical base64 chunk data,
 * and the two path grammars (workspace-relative and logical `/workspace/…`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Base64 } from "effect/encoding"
import { Option, Result } from "effect"
import { Limits, Transfer } from "../../src/proto/index.js"

const KiB = 1024
const state = { received: 0, declaredSize: 200 * KiB, maxTotal: Limits.MaxTransferBytes }

describe("Transfer.checkChunk", () => {
  it("accepts a chunk at the received offset and returns the new total", () => {
    assert.deepStrictEqual(Transfer.checkChunk(state, { offset: 0, length: 1 }), Result.succeed(1))
    assert.deepStrictEqual(Transfer.checkChunk({ ...state, received: 64 * KiB }, { offset: 64 * KiB, length: 64 * KiB }), Result.succeed(128 * KiB))
  })

  it("accepts exactly 64 KiB and refuses one byte more as chunk_too_large", () => {
    assert.deepStrictEqual(Transfer.checkChunk(state, { offset: 0, length: Limits.MaxChunkBytes }), Result.succeed(64 * KiB))
    assert.deepStrictEqual(Transfer.checkChunk(state, { offset: 0, length: Limits.MaxChunkBytes + 1 }), Result.fail("chunk_too_large"))
  })

  it("refuses a chunk that does not start where the previous one ended", () => {
    const after = { ...state, received: 10 }
    for (const offset of [0, 9, 11]) {
      assert.deepStrictEqual(Transfer.checkChunk(after, { offset, length: 5 }), Result.fail("offset_mismatch"))
    }
  })

  it("refuses an empty chunk", () => {
    assert.deepStrictEqual(Transfer.checkChunk(state, { offset: 0, length: 0 }), Result.fail("empty_chunk"))
  })

  it("refuses a chunk past the declared size or the transfer bound, and accepts one ending exactly there", () => {
    const near = { received: 90, declaredSize: 100, maxTotal: Limits.MaxTransferBytes }
    assert.deepStrictEqual(Transfer.checkChunk(near, { offset: 90, length: 10 }), Result.succeed(100))
    assert.deepStrictEqual(Transfer.checkChunk(near, { offset: 90, length: 11 }), Result.fail("overflow"))
    const bound = { received: Limits.MaxTransferBytes - 5, declaredSize: Limits.MaxTransferBytes + 100, maxTotal: Limits.MaxTransferBytes }
    assert.deepStrictEqual(Transfer.checkChunk(bound, { offset: bound.received, length: 5 }), Result.succeed(Limits.MaxTransferBytes))
    assert.deepStrictEqual(Transfer.checkChunk(bound, { offset: bound.received, length: 6 }), Result.fail("overflow"))
  })
})

describe("Transfer.checkCommit", () => {
  const sha = "d8d1102ee261c2bc0fb7eeab1d14cec5b49b8cab27915f4c1d5b8cbaa8686dde"
  it("accepts a complete body with the declared digest", () => {
    assert.deepStrictEqual(Transfer.checkCommit({ received: 12, declaredSize: 12, declaredSha256: sha }, sha), Option.none())
  })
  it("refuses a commit before every declared byte arrived", () => {
    assert.deepStrictEqual(Transfer.checkCommit({ received: 11, declaredSize: 12, declaredSha256: sha }, sha), Option.some("short_body"))
  })
  it("refuses a body whose digest differs", () => {
    const other = "0".repeat(64)
    assert.deepStrictEqual(Transfer.checkCommit({ received: 12, declaredSize: 12, declaredSha256: sha }, other), Option.some("digest_mismatch"))
  })
})

describe("Transfer.decodeChunkData", () => {
  it("decodes canonical standard padded base64 and re-encodes to the same text", () => {
    const bytes = Result.getOrThrow(Transfer.decodeChunkData("IyBJbnRybwpIaS4K"))
    assert.strictEqual(new TextDecoder().decode(bytes), "# Intro\nHi.\n")
    assert.strictEqual(Transfer.encodeChunkData(bytes), "IyBJbnRybwpIaS4K")
    assert.deepStrictEqual(Transfer.decodeChunkData("QQ=="), Result.succeed(new Uint8Array([0x41])))
    assert.deepStrictEqual(Transfer.decodeChunkData("+/8="), Result.succeed(new Uint8Array([0xfb, 0xff])))
  })

  it("refuses unpadded, URL-safe, whitespace, invalid and non-canonical encodings", () => {
    for (const data of ["QQ", "QQ=", "-_8=", "QQ==\n", " QQ==", "QQ=A", "Q===", "QR==", "QUF=", "@@@@", "QQ==QQ=="]) {
      assert.deepStrictEqual(Transfer.decodeChunkData(data), Result.fail("bad_base64"), data)
    }
  })
})

describe("Transfer.decodeChunkData agrees with re-encoding", () => {
  it("accepts exactly the texts that re-encode to themselves (every tail of 1..3 bytes, seeded random texts)", () => {
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    // The oracle: a text is canonical when decoding then encoding gives it back.
    const oracle = (data: string) => {
      const decoded = Base64.decode(data)
      return decoded._tag === "Success" && Base64.encode(decoded.success) === data
    }
    const texts: Array<string> = []
    for (const a of alphabet) for (const b of alphabet) texts.push(`QUFB${a}${b}==`)
    for (const a of alphabet) for (const b of alphabet) texts.push(`${a}Q${b}=`)
    let seed = 7
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648)
    for (let i = 0; i < 2000; i++) {
      const len = 4 * (1 + (next() % 6))
      let t = ""
      for (let k = 0; k < len; k++) t += alphabet[next() % 64]
      const pad = next() % 3
      texts.push(t.slice(0, len - pad) + "=".repeat(pad))
    }
    let accepted = 0
    for (const t of texts) {
      const ok = Result.isSuccess(Transfer.decodeChunkData(t))
      assert.strictEqual(ok, oracle(t), t)
      if (ok) accepted++
    }
    assert.isAbove(accepted, 100)
    assert.isBelow(accepted, texts.length)
  })
})

describe("Transfer.validateRelativePath", () => {
  const relative = (path: string, allowRoot = false) => Transfer.validateRelativePath(path, { allowRoot })

  it("accepts slash-separated workspace-relative paths up to 4096 bytes", () => {
    for (const path of ["README.md", "src/a/b.ts", ".hidden/x", "a..b/c", "名前/ファイル.txt"]) {
      assert.deepStrictEqual(relative(path), Option.none(), path)
    }
    assert.deepStrictEqual(relative("a/".repeat(2047) + "bc"), Option.none())
    assert.strictEqual(("a/".repeat(2047) + "bc").length, 4096)
  })

  it("allows the empty root only where the caller allows it", () => {
    assert.deepStrictEqual(relative("", true), Option.none())
    assert.deepStrictEqual(relative(""), Option.some("empty"))
  })

  it("refuses an absolute path", () => {
    assert.deepStrictEqual(relative("/etc/passwd"), Option.some("absolute"))
    assert.deepStrictEqual(relative("/", true), Option.some("absolute"))
  })

  it("refuses . and .. elements", () => {
    for (const path of [".", "..", "./a", "a/./b", "a/..", "../a"]) assert.deepStrictEqual(relative(path), Option.some("dot_segment"), path)
  })

  it("refuses empty elements from doubled or trailing slashes", () => {
    for (const path of ["a//b", "a/", "a/b/"]) assert.deepStrictEqual(relative(path), Option.some("empty_segment"), path)
  })

  it("refuses backslash, NUL, CR and LF", () => {
    for (const path of ["a\\b", "a\u0000b", "a\rb", "a\nb"]) assert.deepStrictEqual(relative(path), Option.some("forbidden_character"))
  })

  it("refuses a path over 4096 UTF-8 bytes", () => {
    assert.deepStrictEqual(relative("a".repeat(4097)), Option.some("too_long"))
    assert.deepStrictEqual(relative("é".repeat(2049)), Option.some("too_long"))
  })
})

describe("Transfer.validateLogicalPath", () => {
  const logical = (path: string, allowRoot = false) => Transfer.validateLogicalPath(path, { allowRoot })

  it("accepts clean paths under /workspace/", () => {
    for (const path of ["/workspace/a", "/workspace/notes/hello.txt", "/workspace/.config/x"]) {
      assert.deepStrictEqual(logical(path), Option.none(), path)
    }
  })

  it("allows /workspace itself only where the caller allows it", () => {
    assert.deepStrictEqual(logical("/workspace", true), Option.none())
    assert.deepStrictEqual(logical("/workspace"), Option.some("not_under_workspace"))
  })

  it("refuses paths outside /workspace", () => {
    for (const path of ["/work", "/workspaces/a", "/workspace-x/a", "workspace/a", "/tmp/a", "/"]) {
      assert.deepStrictEqual(logical(path, true), Option.some("not_under_workspace"), path)
    }
  })

  it("refuses an empty path, dot elements, empty elements, forbidden characters and oversized paths", () => {
    assert.deepStrictEqual(logical(""), Option.some("empty"))
    assert.deepStrictEqual(logical("/workspace/a/../b"), Option.some("dot_segment"))
    assert.deepStrictEqual(logical("/workspace/./b"), Option.some("dot_segment"))
    assert.deepStrictEqual(logical("/workspace//b"), Option.some("empty_segment"))
    assert.deepStrictEqual(logical("/workspace/"), Option.some("empty_segment"))
    assert.deepStrictEqual(logical("/workspace/b/"), Option.some("empty_segment"))
    assert.deepStrictEqual(logical("/workspace/a\\b"), Option.some("forbidden_character"))
    assert.deepStrictEqual(logical("/workspace/a\nb"), Option.some("forbidden_character"))
    assert.deepStrictEqual(logical("/workspace/" + "a".repeat(4086)), Option.some("too_long"))
    assert.deepStrictEqual(logical("/workspace/" + "a".repeat(4085)), Option.none())
  })
})
