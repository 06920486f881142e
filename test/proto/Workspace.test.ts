/**
 * Workspace validators (reference part 2 §7): read requests, directory listings, read results against their
 * request, write frames and export frames.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Ids, Messages, Workspace } from "../../src/proto/index.js"
import { getErr, getOk } from "./support/frames.js"

const ENV = "8d3f1a27-5b6c-4e9d-a0f2-7c1e3b5d9a46"
const SESSION = "c41e9b72-0d3a-4f58-9e6b-2a7d5c8f1b03"
const SHA = "d8d1102ee261c2bc0fb7eeab1d14cec5b49b8cab27915f4c1d5b8cbaa8686dde"
const handle = Ids.unsafeMake.admissionHandle("h-31")
const runId = Ids.unsafeMake.runId("run-1")
const MiB = 1024 * 1024

const byteRead: Workspace.WorkspaceReadPayload = { handle, environment_id: ENV, path: "README.md", max_bytes: 4 }
const dirRead: Workspace.WorkspaceReadPayload = {
  run_id: runId,
  environment_id: ENV,
  path: "",
  max_bytes: 0,
  operation: "directory",
  max_entries: 3
}

describe("Workspace.validateReadRequest", () => {
  it("accepts a byte read of 1 byte up to 1 MiB and a directory read of 1 up to 1024 entries", () => {
    for (const request of [
      byteRead,
      { ...byteRead, max_bytes: 1 },
      { ...byteRead, max_bytes: MiB, operation: "" as const, max_entries: 0 },
      dirRead,
      { ...dirRead, max_entries: 1 },
      { ...dirRead, max_entries: 1024, path: "src/lib" }
    ]) {
      assert.deepStrictEqual(Workspace.validateReadRequest(request), Option.none())
    }
  })

  it("refuses a request without a target or with both a handle and a Run", () => {
    const { handle: _h, ...noTarget } = byteRead
    assert.deepStrictEqual(Workspace.validateReadRequest(noTarget), Option.some("target"))
    assert.deepStrictEqual(Workspace.validateReadRequest({ ...byteRead, run_id: runId }), Option.some("target"))
  })

  it("refuses byte limits outside 1..1 MiB, entry limits on a byte read, and byte limits on a directory read", () => {
    for (const request of [
      { ...byteRead, max_bytes: 0 },
      { ...byteRead, max_bytes: MiB + 1 },
      { ...byteRead, max_entries: 5 },
      { ...dirRead, max_bytes: 1 },
      { ...dirRead, max_entries: 0 },
      { ...dirRead, max_entries: 1025 }
    ]) {
      assert.deepStrictEqual(Workspace.validateReadRequest(request), Option.some("limits"))
    }
    const { max_entries: _m, ...noEntries } = dirRead
    assert.deepStrictEqual(Workspace.validateReadRequest(noEntries), Option.some("limits"))
  })

  it("refuses an invalid path, and the root for a byte read", () => {
    for (const request of [{ ...byteRead, path: "" }, { ...byteRead, path: "/etc" }, { ...dirRead, path: "../up" }, { ...dirRead, path: "a//b" }]) {
      assert.deepStrictEqual(Workspace.validateReadRequest(request), Option.some("path"))
    }
  })
})

const file = (name: string, size = 1): Workspace.DirectoryEntry => ({ name, kind: "file", size_bytes: size })
const dir = (name: string): Workspace.DirectoryEntry => ({ name, kind: "directory", size_bytes: null })

describe("Workspace.validateDirectoryResult", () => {
  it("accepts up to max_entries unique single-component names with sizes only on files", () => {
    const listing = {
      entries: [file("main.ts", 1204), dir("lib"), { name: "link", kind: "symlink" as const, size_bytes: null }],
      truncated: true
    }
    assert.deepStrictEqual(Workspace.validateDirectoryResult(listing, 3), Option.none())
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [], truncated: false }, 1), Option.none())
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [{ name: "x", kind: "other", size_bytes: null }, file("empty", 0)], truncated: false }, 2), Option.none())
  })

  it("accepts a name of exactly 255 bytes and refuses 256", () => {
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [file("é".repeat(127) + "a")], truncated: false }, 1), Option.none())
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [file("é".repeat(128))], truncated: false }, 1), Option.some("entry_name"))
  })

  it("refuses more entries than asked for or than 1024", () => {
    const four = { entries: [file("a"), file("b"), file("c"), file("d")], truncated: true }
    assert.deepStrictEqual(Workspace.validateDirectoryResult(four, 3), Option.some("too_many_entries"))
    const many = { entries: Array.from({ length: 1025 }, (_, i) => file(`f${i}`)), truncated: false }
    assert.deepStrictEqual(Workspace.validateDirectoryResult(many, 5000), Option.some("too_many_entries"))
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ ...many, entries: many.entries.slice(1) }, 5000), Option.none())
  })

  it("refuses names that are not one clean UTF-8 path component", () => {
    for (const name of ["", ".", "..", "a/b", "a\\b", "a\u0000", "a\rb", "a\nb", "bad\ud800"]) {
      assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [file(name)], truncated: false }, 1), Option.some("entry_name"), JSON.stringify(name))
    }
  })

  it("refuses a name listed twice", () => {
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [file("a"), dir("a")], truncated: false }, 5), Option.some("duplicate_name"))
  })

  it("refuses a file without a size and a non-file with one", () => {
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [{ name: "a", kind: "file", size_bytes: null }], truncated: false }, 5), Option.some("entry_size"))
    assert.deepStrictEqual(Workspace.validateDirectoryResult({ entries: [{ name: "a", kind: "directory", size_bytes: 0 }], truncated: false }, 5), Option.some("entry_size"))
  })
})

describe("Workspace.validateReadResult", () => {
  const done = { outcome: "completed", close_acknowledged: true } as const

  it("accepts a completed byte read within max_bytes, truncated only when exactly full", () => {
    assert.isTrue(Workspace.validateReadResult(byteRead, { ...done, data: "YWJj" })) // 3 bytes
    assert.isTrue(Workspace.validateReadResult(byteRead, { ...done, data: "YWJjZA==", truncated: true })) // 4 bytes
    assert.isTrue(Workspace.validateReadResult(byteRead, done)) // an empty file
  })

  it("refuses a byte read that is too long, falsely truncated, badly encoded or carries a listing", () => {
    assert.isFalse(Workspace.validateReadResult(byteRead, { ...done, data: "YWJjZGU=" })) // 5 bytes
    assert.isFalse(Workspace.validateReadResult(byteRead, { ...done, data: "YWJj", truncated: true }))
    assert.isFalse(Workspace.validateReadResult(byteRead, { ...done, data: "YWJj\n" }))
    assert.isFalse(Workspace.validateReadResult(byteRead, { ...done, directory: { entries: [], truncated: false } }))
  })

  it("refuses a completed result without an acknowledged close or with an error code", () => {
    assert.isFalse(Workspace.validateReadResult(byteRead, { outcome: "completed", data: "YWJj" }))
    assert.isFalse(Workspace.validateReadResult(byteRead, { ...done, close_acknowledged: false }))
    assert.isFalse(Workspace.validateReadResult(byteRead, { ...done, error_code: "not_found" }))
  })

  it("accepts a completed directory read with a valid listing and nothing else", () => {
    const directory = { entries: [file("a"), dir("b")], truncated: true }
    assert.isTrue(Workspace.validateReadResult(dirRead, { ...done, directory }))
    assert.isTrue(Workspace.validateReadResult(dirRead, { ...done, directory, truncated: false }))
  })

  it("refuses a directory read with data, top-level truncation, no listing or an invalid listing", () => {
    const directory = { entries: [file("a")], truncated: false }
    assert.isFalse(Workspace.validateReadResult(dirRead, { ...done, directory, data: "YQ==" }))
    assert.isFalse(Workspace.validateReadResult(dirRead, { ...done, directory, truncated: true }))
    assert.isFalse(Workspace.validateReadResult(dirRead, done))
    const tooMany = { entries: [file("a"), file("b"), file("c"), file("d")], truncated: false }
    assert.isFalse(Workspace.validateReadResult(dirRead, { ...done, directory: tooMany }))
  })

  it("accepts a rejection with its code and an unknown outcome only with read_unconfirmed", () => {
    assert.isTrue(Workspace.validateReadResult(byteRead, { outcome: "rejected", error_code: "not_found" }))
    assert.isTrue(Workspace.validateReadResult(dirRead, { outcome: "rejected", error_code: "not_directory" }))
    assert.isTrue(Workspace.validateReadResult(byteRead, { outcome: "unknown", error_code: "read_unconfirmed" }))
  })

  it("refuses a rejection or unknown outcome that carries data, truncation, a close, a listing or the wrong code", () => {
    for (const result of [
      { outcome: "rejected", error_code: "not_found", data: "YQ==" },
      { outcome: "rejected", error_code: "not_found", truncated: false },
      { outcome: "rejected", error_code: "not_found", close_acknowledged: true },
      { outcome: "rejected", error_code: "not_found", directory: { entries: [], truncated: false } },
      { outcome: "rejected" },
      { outcome: "rejected", error_code: "read_unconfirmed" },
      { outcome: "unknown", error_code: "not_found" },
      { outcome: "unknown" }
    ] as ReadonlyArray<Workspace.WorkspaceReadResultPayload>) {
      assert.isFalse(Workspace.validateReadResult(byteRead, result), JSON.stringify(result))
    }
    assert.isFalse(Workspace.validateReadResult(byteRead, { outcome: "rejected", error_code: "not_directory" }))
  })
})

describe("Workspace.validateWriteRequest", () => {
  const begin: Workspace.WorkspaceWritePayload = {
    step: "begin",
    environment_id: ENV,
    session_id: SESSION,
    path: "docs/intro.md",
    size_bytes: 12,
    sha256: SHA
  }

  it("accepts a begin header, a chunk with data and a bare commit", () => {
    for (const frame of [
      begin,
      { ...begin, size_bytes: 0 },
      { ...begin, size_bytes: 50 * MiB },
      { step: "chunk", data: "IyBJbnRybwpIaS4K" },
      { step: "chunk", offset: 12, data: "QQ==" },
      { step: "commit" }
    ] as ReadonlyArray<Workspace.WorkspaceWritePayload>) {
      assert.deepStrictEqual(Workspace.validateWriteRequest(frame), Option.none())
    }
  })

  it("refuses a begin whose identities are not canonical UUIDs", () => {
    const { environment_id: _e, ...noEnvironment } = begin
    for (const frame of [
      { ...begin, environment_id: ENV.toUpperCase() },
      { ...begin, session_id: "not-a-uuid" },
      { ...begin, session_id: "00000000-0000-0000-0000-000000000000" },
      noEnvironment
    ]) {
      assert.deepStrictEqual(Workspace.validateWriteRequest(frame), Option.some("identity"))
    }
  })

  it("refuses a begin with a missing or invalid path", () => {
    const { path: _p, ...noPath } = begin
    for (const frame of [noPath, { ...begin, path: "/abs" }, { ...begin, path: "." }, { ...begin, path: "a/../b" }, { ...begin, path: "" }]) {
      assert.deepStrictEqual(Workspace.validateWriteRequest(frame), Option.some("path"))
    }
  })

  it("refuses a begin without a size or with more than 50 MiB", () => {
    const { size_bytes: _s, ...noSize } = begin
    assert.deepStrictEqual(Workspace.validateWriteRequest(noSize), Option.some("size"))
    assert.deepStrictEqual(Workspace.validateWriteRequest({ ...begin, size_bytes: 50 * MiB + 1 }), Option.some("size"))
  })

  it("refuses a begin without a lower-case SHA-256", () => {
    const { sha256: _d, ...noDigest } = begin
    for (const frame of [noDigest, { ...begin, sha256: SHA.toUpperCase() }, { ...begin, sha256: SHA.slice(1) }]) {
      assert.deepStrictEqual(Workspace.validateWriteRequest(frame), Option.some("digest"))
    }
  })

  it("refuses members that do not belong to the step", () => {
    for (const frame of [
      { ...begin, data: "QQ==" },
      { ...begin, offset: 1 },
      { step: "chunk" },
      { step: "chunk", data: "QQ==", path: "a" },
      { step: "chunk", data: "QQ==", sha256: SHA },
      { step: "commit", data: "QQ==" },
      { step: "commit", offset: 12 },
      { step: "commit", size_bytes: 12 }
    ] as ReadonlyArray<Workspace.WorkspaceWritePayload>) {
      assert.deepStrictEqual(Workspace.validateWriteRequest(frame), Option.some("step_members"), JSON.stringify(frame))
    }
  })
})

describe("Workspace.validateExportRequest", () => {
  it("accepts begin with a handle and Environment, next with an offset, and a bare cancel", () => {
    for (const frame of [
      { step: "begin", handle, environment_id: ENV },
      { step: "begin", handle, environment_id: ENV, offset: 0 },
      { step: "next", offset: 65536 },
      { step: "next" },
      { step: "cancel" }
    ] as ReadonlyArray<Workspace.WorkspaceExportPayload>) {
      assert.deepStrictEqual(Workspace.validateExportRequest(frame), Option.none())
    }
  })

  it("refuses members that do not belong to the step", () => {
    for (const frame of [
      { step: "begin", environment_id: ENV },
      { step: "begin", handle },
      { step: "begin", handle, environment_id: ENV, offset: 5 },
      { step: "next", offset: 1, handle },
      { step: "next", environment_id: ENV },
      { step: "cancel", offset: 3 },
      { step: "cancel", handle }
    ] as ReadonlyArray<Workspace.WorkspaceExportPayload>) {
      assert.deepStrictEqual(Workspace.validateExportRequest(frame), Option.some("step_members"), JSON.stringify(frame))
    }
  })
})

describe("workspace_export frames", () => {
  const frame = (environment_id: string) =>
    JSON.stringify({ type: "workspace_export", id: "export-1", payload: { step: "begin", handle: "h-31", environment_id } })

  it("accept an Environment id of 128 bytes and refuse 129 (reference: 1..128 bytes)", () => {
    getOk(Messages.decodeCoreToRuntime(frame("e".repeat(128))))
    assert.strictEqual(getErr(Messages.decodeCoreToRuntime(frame("e".repeat(129)))).code, "invalid_payload")
    assert.strictEqual(getErr(Messages.decodeCoreToRuntime(frame(" "))).code, "invalid_payload")
  })
})
