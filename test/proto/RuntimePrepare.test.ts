/**
 * runtime_prepare frame rules (`RuntimePrepare.validateRequest`) and receipt validity
 * (`RuntimePrepare.validateResult`), reference part 2 §6.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { RuntimePrepare } from "../../src/proto/index.js"

type Payload = RuntimePrepare.RuntimePreparePayload
const ENV = "8d3f1a27-5b6c-4e9d-a0f2-7c1e3b5d9a46"
const SESSION = "c41e9b72-0d3a-4f58-9e6b-2a7d5c8f1b03"
const SHA = "d8d1102ee261c2bc0fb7eeab1d14cec5b49b8cab27915f4c1d5b8cbaa8686dde"
const MiB = 1024 * 1024
const meta = { type: "inline", name: "release-notes", description: "Drafts release notes" } as const

const begin = { step: "begin", environment_id: ENV, session_id: SESSION } as const
const fileBegin: Payload = { ...begin, action: "file", file: { path: "/workspace/docs/intro.md" }, size_bytes: 12, sha256: SHA }
const skillBegin: Payload = { ...begin, action: "skill", skill: meta, size_bytes: 2048, sha256: SHA }
const pluginBegin: Payload = { ...begin, action: "plugin", plugin: meta, slot: 49, size_bytes: 4096, sha256: SHA }
const initBegin = (initialization: RuntimePrepare.Initialization): Payload => ({ ...begin, action: "initialize", initialization })
const finalizeBegin: Payload = { ...begin, action: "finalize", sources: { skills: [meta], directories: ["/workspace/skills"] } }

const issue = (payload: Payload) => RuntimePrepare.validateRequest(payload)

describe("RuntimePrepare.validateRequest", () => {
  it("accepts every begin action, a chunk with data and a bare commit", () => {
    for (const payload of [
      fileBegin,
      { ...fileBegin, size_bytes: 0 },
      { ...fileBegin, size_bytes: 50 * MiB },
      skillBegin,
      pluginBegin,
      { ...pluginBegin, slot: 0 },
      initBegin({ action: "configure", env: { NODE_ENV: "production", EMPTY: "" } }),
      initBegin({ action: "npm", network: "enabled", packages: ["typescript", "@effect/vitest"] }),
      initBegin({ action: "python", network: "disabled", packages: ["requests==2.32.0"] }),
      initBegin({ action: "setup", network: "disabled", command: "make setup", cwd: "/workspace" }),
      initBegin({ action: "setup", network: "enabled", command: "npm ci", cwd: "/workspace/app" }),
      finalizeBegin,
      { step: "chunk", data: "IyBJbnRybwpIaS4K" },
      { step: "chunk", offset: 65536, data: "QQ==" },
      { step: "commit" }
    ] satisfies ReadonlyArray<Payload>) {
      assert.deepStrictEqual(issue(payload), Option.none(), JSON.stringify(payload).slice(0, 120))
    }
  })

  it("refuses a begin without canonical Environment and Session UUIDs", () => {
    const { session_id: _s, ...noSession } = fileBegin
    for (const payload of [noSession, { ...fileBegin, environment_id: ENV.toUpperCase() }, { ...fileBegin, session_id: "session-1" }]) {
      assert.deepStrictEqual(issue(payload), Option.some("identity"))
    }
  })

  it("refuses a begin with no header, two headers or no action", () => {
    const { file: _f, ...noHeader } = fileBegin
    const { action: _a, ...noAction } = fileBegin
    for (const payload of [noHeader, { ...fileBegin, skill: meta }, noAction]) {
      assert.deepStrictEqual(issue(payload), Option.some("header_count"))
    }
  })

  it("refuses a begin whose action does not match its header", () => {
    assert.deepStrictEqual(issue({ ...fileBegin, action: "skill" }), Option.some("action_mismatch"))
    assert.deepStrictEqual(issue({ ...finalizeBegin, action: "initialize" }), Option.some("action_mismatch"))
  })

  it("refuses a plugin slot over 49 and any slot on another action", () => {
    assert.deepStrictEqual(issue({ ...pluginBegin, slot: 50 }), Option.some("slot"))
    assert.deepStrictEqual(issue({ ...skillBegin, slot: 1 }), Option.some("slot"))
  })

  it("refuses sizes outside the action's rule", () => {
    assert.deepStrictEqual(issue({ ...fileBegin, size_bytes: 50 * MiB + 1 }), Option.some("size"))
    assert.deepStrictEqual(issue({ ...skillBegin, size_bytes: 0 }), Option.some("size"))
    assert.deepStrictEqual(issue({ ...finalizeBegin, size_bytes: 3 }), Option.some("size"))
  })

  it("refuses a missing or malformed digest on byte actions and any digest on header-only actions", () => {
    const { sha256: _d, ...noDigest } = fileBegin
    for (const payload of [noDigest, { ...fileBegin, sha256: SHA.toUpperCase() }, { ...skillBegin, sha256: "abc" }, { ...finalizeBegin, sha256: SHA }]) {
      assert.deepStrictEqual(issue(payload), Option.some("digest"))
    }
  })

  it("refuses a file path that is not a clean logical path under /workspace/", () => {
    for (const path of ["/workspace", "docs/intro.md", "/etc/hosts", "/workspace/a/../b", "/workspace//a"]) {
      assert.deepStrictEqual(issue({ ...fileBegin, file: { path } }), Option.some("path"), path)
    }
  })

  it("refuses an initialization header with members or values its action does not allow", () => {
    const cases: ReadonlyArray<RuntimePrepare.Initialization> = [
      { action: "configure", packages: ["x"] },
      { action: "configure", env: { "A=B": "x" } },
      { action: "configure", env: { "": "x" } },
      { action: "configure", env: { "A\nB": "x" } },
      { action: "configure", env: { A: "x\u0000" } },
      { action: "npm", packages: ["typescript"] },
      { action: "npm", network: "enabled", packages: [] },
      { action: "npm", network: "enabled" },
      { action: "npm", network: "enabled", packages: ["--global"] },
      { action: "python", network: "enabled", packages: [""] },
      { action: "python", network: "enabled", packages: ["a\nb"] },
      { action: "npm", network: "enabled", packages: ["x"], command: "rm" },
      { action: "setup", network: "enabled", cwd: "/workspace" },
      { action: "setup", network: "enabled", command: "", cwd: "/workspace" },
      { action: "setup", command: "make", cwd: "/workspace" },
      { action: "setup", network: "enabled", command: "make" },
      { action: "setup", network: "enabled", command: "make", cwd: "/tmp" },
      { action: "setup", network: "enabled", command: "make\u0000", cwd: "/workspace" },
      { action: "setup", network: "enabled", command: "make", cwd: "/workspace", packages: ["x"] }
    ]
    for (const initialization of cases) {
      assert.deepStrictEqual(issue(initBegin(initialization)), Option.some("initialization"), JSON.stringify(initialization))
    }
  })

  it("refuses members that do not belong to the step", () => {
    for (const payload of [
      { ...fileBegin, data: "QQ==" },
      { ...fileBegin, offset: 3 },
      { step: "chunk" },
      { step: "chunk", data: "QQ==", action: "file" },
      { step: "chunk", data: "QQ==", sha256: SHA },
      { step: "chunk", data: "QQ==", offset: 50 * MiB + 1 },
      { step: "commit", data: "QQ==" },
      { step: "commit", offset: 12 },
      { step: "commit", environment_id: ENV }
    ] satisfies ReadonlyArray<Payload>) {
      assert.deepStrictEqual(issue(payload), Option.some("step_members"), JSON.stringify(payload).slice(0, 120))
    }
  })
})

describe("RuntimePrepare.validateResult", () => {
  const afterBegin = { step: "begin" } as const
  const afterChunk = { step: "chunk", offset: 12 } as const
  const afterCommit = { step: "commit", sizeBytes: 12 } as const
  const valid = RuntimePrepare.validateResult

  it("accepts ready after begin, received with the new total after a chunk, completed with the size after commit", () => {
    assert.isTrue(valid(afterBegin, { outcome: "ready" }))
    assert.isTrue(valid(afterChunk, { outcome: "received", offset: 12 }))
    assert.isTrue(valid(afterCommit, { outcome: "completed", size_bytes: 12 }))
    assert.isTrue(valid({ step: "commit", sizeBytes: 0 }, { outcome: "completed" }))
  })

  it("refuses a success outcome for another step, another offset or size, or with an error code", () => {
    for (const [expected, result] of [
      [afterChunk, { outcome: "ready" }],
      [afterBegin, { outcome: "ready", offset: 1 }],
      [afterBegin, { outcome: "ready", error_code: "invalid_request" }],
      [afterBegin, { outcome: "received", offset: 12 }],
      [afterChunk, { outcome: "received", offset: 11 }],
      [afterChunk, { outcome: "received", offset: 12, size_bytes: 12 }],
      [afterCommit, { outcome: "completed", size_bytes: 11 }],
      [afterChunk, { outcome: "completed", size_bytes: 12 }],
      [afterCommit, { outcome: "completed", size_bytes: 12, offset: 12 }],
      [afterCommit, { outcome: "completed", size_bytes: 12, exit_code: 0 }]
    ] as const) {
      assert.isFalse(valid(expected, result), JSON.stringify(result))
    }
  })

  it("accepts each rejection code with rejected, failed with its code and exit status, unknown with unconfirmed", () => {
    for (const code of ["invalid_request", "resource_unavailable", "runtime_preparation_capacity", "runtime_preparation_unsupported", "runtime_preparation_rejected"] as const) {
      for (const expected of [afterBegin, afterChunk, afterCommit]) {
        assert.isTrue(valid(expected, { outcome: "rejected", error_code: code }))
      }
    }
    assert.isTrue(valid(afterCommit, { outcome: "failed", error_code: "runtime_preparation_failed" }))
    assert.isTrue(valid(afterCommit, { outcome: "failed", error_code: "runtime_preparation_failed", exit_code: 1 }))
    assert.isTrue(valid(afterChunk, { outcome: "unknown", error_code: "runtime_preparation_unconfirmed" }))
  })

  it("refuses a terminal outcome with the wrong code, no code, an offset, a size or an exit status", () => {
    for (const result of [
      { outcome: "rejected" },
      { outcome: "rejected", error_code: "runtime_preparation_failed" },
      { outcome: "rejected", error_code: "runtime_preparation_unconfirmed" },
      { outcome: "rejected", error_code: "invalid_request", offset: 12 },
      { outcome: "rejected", error_code: "invalid_request", exit_code: 1 },
      { outcome: "failed" },
      { outcome: "failed", error_code: "invalid_request" },
      { outcome: "failed", error_code: "runtime_preparation_failed", size_bytes: 12 },
      { outcome: "unknown" },
      { outcome: "unknown", error_code: "runtime_preparation_rejected" },
      { outcome: "unknown", error_code: "runtime_preparation_unconfirmed", offset: 12 }
    ] as ReadonlyArray<RuntimePrepare.RuntimePrepareResultPayload>) {
      assert.isFalse(valid(afterCommit, result), JSON.stringify(result))
    }
  })
})
