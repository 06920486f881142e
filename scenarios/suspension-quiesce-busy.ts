import { SessionA } from "./Fixtures.js"
import { quiesce, quiesced, resume, resumed } from "./Suspension.js"
import { check, closed, connect, disconnect, interleave, reconnect, scenario, silence } from "./WireScenario.js"
import { boundHeartbeat, prepareChunk, prepareCommit, prepareFileBegin, prepareResult } from "./Workspace.js"

const T1 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a31"
const Q0 = "quiesce-other-environment"
const Q1 = "quiesce-busy"
const Q2 = "quiesce-idle"
const R1 = "resume-after-quiesce"
const S1 = "suspend-busy"
const S2 = "suspend-idle"
const Other = "8e4d2c1b-0a9f-4e3d-8c7b-6a5f4e3d2c1b"
const Notes = "notes"
const NotesSha = "ab5aa97074c454a0632057e704220d9a6678fbf773a0a5806fc09b8173b07309"

export default scenario({
  name: "suspension-quiesce-busy",
  description:
    "environment_quiesce is accepted only when nothing is unsettled: a quiesce naming another Environment is " +
    "invalid_request; one that arrives while a runtime_prepare transfer is open is resource_busy and the transfer " +
    "completes untouched; once idle the quiesce is accepted, the reply comes first and the Runtime closes the " +
    "connection; on the next connection Core replays nothing and the matching resume reopens admission.",
  setup: { workspace: {} },
  sections: ["Message families", "Ownership and connection"],
  replay: {
    runtime: { asserts: "invalid_request for another Environment; resource_busy while a transfer is open; accepted when idle, then the daemon closes; fenced after reconnect until the resume" },
    core: { asserts: "rejected with the Runtime's category; the accepted reply read although the connection ends right after it; nothing replayed after reconnect" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    quiesce(Q0, S1, { environmentId: Other }),
    quiesced(Q0, S1, "invalid_request", Other),
    check("core", { _tag: "SuspensionOutcome", request: Q0, outcome: { rejected: "invalid_request" } }),
    prepareFileBegin(T1, SessionA, "/workspace/notes/busy.txt", Notes, NotesSha),
    quiesce(Q1, S1, { note: "the transfer is open: unsettled" }),
    interleave([[prepareResult(T1, { outcome: "ready" }).message], [quiesced(Q1, S1, "resource_busy").message]]),
    prepareChunk(T1, 0, Notes),
    prepareResult(T1, { outcome: "received", offset: 5 }),
    prepareCommit(T1),
    prepareResult(T1, { outcome: "completed", size_bytes: 5 }),
    check("core", { _tag: "SuspensionOutcome", request: Q1, outcome: { rejected: "resource_busy" } }),
    check("runtime", { _tag: "SuspensionState", state: "open" }, "a refused quiesce changes nothing"),
    check("core", { _tag: "WorkspaceOutcome", operation: T1, outcome: "completed" }),
    quiesce(Q2, S2),
    quiesced(Q2, S2),
    closed({ sides: ["runtime"], note: "the daemon closes right after the accepted reply" }),
    disconnect({ sides: ["core"], note: "the scripted Runtime ends the connection right after the reply, as a daemon does" }),
    check("core", { _tag: "SuspensionOutcome", request: Q2, outcome: "accepted" }),
    reconnect(),
    boundHeartbeat(),
    silence("10 seconds", { note: "Core replays no quiesce; the fenced daemon sends nothing but heartbeats" }),
    resume(R1, S2),
    resumed(R1, S2),
    check("core", { _tag: "SuspensionOutcome", request: R1, outcome: "accepted" })
  ]
})
