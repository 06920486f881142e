import { release, SessionA, status } from "./Fixtures.js"
import { check, scenario } from "./WireScenario.js"
import { b64, boundReadOnlyReady, readBytes, readResult, writeBegin, writeChunk, writeCommit, writeResult } from "./Workspace.js"

const W1 = "c0ffee00-1234-4abc-9def-000000000021"
const W2 = "c0ffee00-1234-4abc-9def-000000000022"
const Notes = "notes"
const NotesSha = "ab5aa97074c454a0632057e704220d9a6678fbf773a0a5806fc09b8173b07309"

export default scenario({
  name: "bounded-transfer-validation",
  description:
    "Bounds are checked on both sides before anything happens: a read outside its limits and a write to a path " +
    "that leaves the workspace are refused by Core's validators (the Runtime answers invalid_request when sent " +
    "anyway); a result over its read limit or a receipt at the wrong offset is not accepted by Core.",
  sections: ["Workspace operations", "Failures, retries and cleanup"],
  setup: { workspace: {} },
  replay: {
    runtime: {
      asserts: "invalid_request for a read outside its limits and an escaping write path; an explicitly truncated " +
        "read; a write acknowledged with each exact new total"
    },
    core: { asserts: "refusals before sending; an over-long read result is unknown; a wrong received offset fails before commit" }
  },
  steps: [
    ...boundReadOnlyReady("prep-ro", SessionA),
    readBytes("read-0", "prep-ro", "README.md", 0, { refusedByCore: "limits" }),
    { ...readResult("read-0", { outcome: "rejected", error_code: "invalid_request" }), sides: ["runtime"] },
    check("core", { _tag: "WorkspaceOutcome", operation: "read-0", outcome: { refused: "limits" } }),
    writeBegin(W1, SessionA, "../escape.txt", Notes, NotesSha, { refusedByCore: "path" }),
    { ...writeResult(W1, { outcome: "rejected", error_code: "invalid_request" }), sides: ["runtime"] },
    check("core", { _tag: "WorkspaceOutcome", operation: W1, outcome: { refused: "path" } }),
    readBytes("read-1", "prep-ro", "README.md", 2),
    { ...readResult("read-1", { outcome: "completed", data: b64("xyz"), close_acknowledged: true }), sides: ["core"], note: "3 bytes for a 2-byte read" },
    {
      ...readResult("read-1", { outcome: "completed", data: b64("he"), truncated: true, close_acknowledged: true }),
      sides: ["runtime"],
      note: "the first 2 of README.md's 5 bytes, truncation explicit"
    },
    check("core", { _tag: "WorkspaceOutcome", operation: "read-1", outcome: "unknown" }),
    { ...release("prep-ro"), sides: ["runtime"], note: "a write needs an idle daemon (no Executor)" },
    { ...status("prep-ro", 3, "released"), sides: ["runtime"] },
    writeBegin(W2, SessionA, "ok.txt", Notes, NotesSha),
    writeResult(W2, { outcome: "ready" }),
    writeChunk(W2, 0, Notes),
    { ...writeResult(W2, { outcome: "received", offset: 4 }), sides: ["core"], note: "not the new total (5)" },
    { ...writeResult(W2, { outcome: "received", offset: 5 }), sides: ["runtime"] },
    check("core", { _tag: "WorkspaceOutcome", operation: W2, outcome: "failed" }),
    { ...writeCommit(W2), sides: ["runtime"] },
    { ...writeResult(W2, { outcome: "completed", size_bytes: 5 }), sides: ["runtime"] }
  ]
})
