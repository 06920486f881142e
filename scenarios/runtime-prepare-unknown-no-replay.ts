import { SessionA } from "./Fixtures.js"
import { check, connect, disconnect, reconnect, scenario, silence } from "./WireScenario.js"
import { boundHeartbeat, prepareChunk, prepareCommit, prepareFileBegin, prepareResult } from "./Workspace.js"

const T1 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a21"
const T2 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a22"
const T3 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a23"
const Notes = "notes"
const NotesSha = "ab5aa97074c454a0632057e704220d9a6678fbf773a0a5806fc09b8173b07309"

export default scenario({
  name: "runtime-prepare-unknown-no-replay",
  description:
    "Bounds and uncertainty of runtime_prepare: a path outside /workspace is refused by Core's validator (nothing " +
    "sent); a received receipt at the wrong offset is invalid, so the transfer is unknown and no commit follows; " +
    "the Runtime's runtime_preparation_unconfirmed stays unknown; and nothing is replayed on the next connection.",
  sections: ["Preparation and execution order", "Failures, retries and cleanup", "Ownership and connection"],
  replay: {
    runtime: { skip: "the Runtime runner has no Environment binding; the daemon side is test/runtime/transfer/Transfer.test.ts" },
    core: { asserts: "refused before sending; unknown for an invalid receipt, for unconfirmed and for a lost connection; silence after reconnect" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    prepareFileBegin(T1, SessionA, "/etc/passwd", Notes, NotesSha, { refusedByCore: "path" }),
    { ...prepareResult(T1, { outcome: "rejected", error_code: "invalid_request" }), sides: ["runtime"] },
    check("core", { _tag: "WorkspaceOutcome", operation: T1, outcome: { refused: "path" } }),
    prepareFileBegin(T3, SessionA, "/workspace/b.txt", Notes, NotesSha),
    prepareResult(T3, { outcome: "ready" }),
    prepareChunk(T3, 0, Notes),
    prepareResult(T3, { outcome: "received", offset: 5 }),
    prepareCommit(T3),
    prepareResult(T3, { outcome: "unknown", error_code: "runtime_preparation_unconfirmed" }),
    check("core", { _tag: "WorkspaceOutcome", operation: T3, outcome: "unknown" }),
    prepareFileBegin(T2, SessionA, "/workspace/a.txt", Notes, NotesSha),
    prepareResult(T2, { outcome: "ready" }),
    prepareChunk(T2, 0, Notes),
    { ...prepareResult(T2, { outcome: "received", offset: 4 }), sides: ["core"], note: "not the new total (5)" },
    check("core", { _tag: "WorkspaceOutcome", operation: T2, outcome: "unknown" }),
    disconnect({ note: "the Runtime drops the unfinished transfer with the connection; nothing was installed" }),
    reconnect(),
    boundHeartbeat(),
    silence("1 minute", { note: "no transfer is replayed on the new connection" }),
    check("core", { _tag: "WorkspaceOutcome", operation: T2, outcome: "unknown" })
  ]
})
