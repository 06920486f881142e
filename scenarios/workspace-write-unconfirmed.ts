import { SessionA } from "./Fixtures.js"
import { check, connect, disconnect, reconnect, scenario, silence } from "./WireScenario.js"
import { boundHeartbeat, writeBegin, writeChunk, writeCommit, writeResult } from "./Workspace.js"

const W1 = "c0ffee00-1234-4abc-9def-000000000011"
const W2 = "c0ffee00-1234-4abc-9def-000000000012"
const Notes = "notes"
const NotesSha = "ab5aa97074c454a0632057e704220d9a6678fbf773a0a5806fc09b8173b07309"

export default scenario({
  name: "workspace-write-unconfirmed",
  description:
    "A commit answered write_unconfirmed keeps its uncertainty (unknown, never a failure); a commit whose " +
    "connection drops before any receipt is unknown too, and the write is never replayed on the next connection.",
  sections: ["Workspace operations", "Failures, retries and cleanup"],
  setup: { workspace: {} },
  replay: {
    runtime: {
      asserts: "a commit whose connection drops is never replayed on the next connection (write_unconfirmed itself needs " +
        "a directory fsync that fails after the rename, which a real filesystem does not produce on demand)"
    },
    core: { asserts: "WriteUnknown for write_unconfirmed and for the lost connection after commit; nothing replayed" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    writeBegin(W1, SessionA, "a.txt", Notes, NotesSha),
    writeResult(W1, { outcome: "ready" }),
    writeChunk(W1, 0, Notes),
    writeResult(W1, { outcome: "received", offset: 5 }),
    writeCommit(W1),
    { ...writeResult(W1, { outcome: "unknown", error_code: "write_unconfirmed" }), sides: ["core"] },
    { ...writeResult(W1, { outcome: "completed", size_bytes: 5 }), sides: ["runtime"], note: "a real install succeeds" },
    check("core", { _tag: "WorkspaceOutcome", operation: W1, outcome: "unknown" }),
    writeBegin(W2, SessionA, "b.txt", Notes, NotesSha),
    writeResult(W2, { outcome: "ready" }),
    writeChunk(W2, 0, Notes),
    writeResult(W2, { outcome: "received", offset: 5 }),
    writeCommit(W2),
    disconnect(),
    check("core", { _tag: "WorkspaceOutcome", operation: W2, outcome: "unknown" }),
    reconnect(),
    boundHeartbeat(),
    silence("1 minute", { note: "the write is not replayed" })
  ]
})
