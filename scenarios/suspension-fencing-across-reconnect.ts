import { SessionA } from "./Fixtures.js"
import { quiesce, quiesced, resume, resumed } from "./Suspension.js"
import { advance, check, closed, connect, disconnect, reconnect, scenario, silence } from "./WireScenario.js"
import { boundHeartbeat, prepareCommit, prepareResult, prepareSetupBegin } from "./Workspace.js"

const T1 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a41"
const T2 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a42"
const Q1 = "quiesce-1"
const Q2 = "quiesce-rollback"
const R1 = "resume-wrong-id"
const R2 = "resume-matching"
const R3 = "resume-repeated"
const R4 = "resume-not-suspended"
const R5 = "resume-rollback"
const S1 = "suspend-1"
const S2 = "suspend-2"

export default scenario({
  name: "suspension-fencing-across-reconnect",
  description:
    "After an accepted quiesce every later connection is fenced: nothing is admitted until environment_resume with " +
    "the same Environment and suspend id arrives as the first frame. No resume within 30 s closes the connection; a " +
    "first frame that is not a resume closes it without a reply; a resume with another suspend id is " +
    "invalid_request and closes it; the matching resume is accepted and work is admitted again. On an open " +
    "connection a repeated resume is accepted, another suspend id is not_suspended, a rollback resume is accepted, " +
    "and a quiesce with rollback is invalid (Core refuses it before sending). Core never replays a request.",
  setup: { workspace: {} },
  sections: ["Message families", "Ownership and connection"],
  replay: {
    runtime: { asserts: "silent while fenced, closed at exactly 30 s without a resume, closed on a non-resume first frame, invalid_request then closed for another suspend id; the matching resume reopens admission; not_suspended and rollback rules" },
    core: { asserts: "accepted; nothing replayed after reconnect; a transfer cut off by the close before its commit is failed; the Runtime's categories; a rollback quiesce refused before sending" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    quiesce(Q1, S1),
    quiesced(Q1, S1),
    closed({ sides: ["runtime"] }),
    disconnect({ sides: ["core"], note: "the scripted Runtime ends the connection right after the reply, as a daemon does" }),
    check("core", { _tag: "SuspensionOutcome", request: Q1, outcome: "accepted" }),
    check("runtime", { _tag: "SuspensionState", state: "suspended", suspendId: S1 }, "agentwire status shows the fence"),
    reconnect(),
    boundHeartbeat(),
    silence("29 seconds", { note: "Core replays nothing; the fenced daemon waits for the resume" }),
    advance("1 second", { sides: ["runtime"] }),
    closed({ sides: ["runtime"], note: "no resume within 30 s of the connection" }),
    disconnect({ sides: ["core"] }),
    reconnect(),
    boundHeartbeat(),
    prepareSetupBegin(T1, SessionA, "true"),
    closed({ sides: ["runtime"] }),
    disconnect({ sides: ["core"] }),
    check("core", { _tag: "WorkspaceOutcome", operation: T1, outcome: "failed" }, "cut off before its commit: nothing can have been installed"),
    reconnect(),
    boundHeartbeat(),
    check("runtime", { _tag: "SuspensionState", state: "suspended", suspendId: S1 }, "still fenced after a refused first frame"),
    resume(R1, S2),
    resumed(R1, S2, "invalid_request"),
    closed({ sides: ["runtime"] }),
    disconnect({ sides: ["core"] }),
    check("core", { _tag: "SuspensionOutcome", request: R1, outcome: { rejected: "invalid_request" } }),
    reconnect(),
    boundHeartbeat(),
    resume(R2, S1),
    resumed(R2, S1),
    check("core", { _tag: "SuspensionOutcome", request: R2, outcome: "accepted" }),
    check("runtime", { _tag: "SuspensionState", state: "open" }),
    prepareSetupBegin(T2, SessionA, "true"),
    prepareResult(T2, { outcome: "ready" }),
    prepareCommit(T2),
    prepareResult(T2, { outcome: "completed" }),
    check("core", { _tag: "WorkspaceOutcome", operation: T2, outcome: "completed" }),
    resume(R3, S1),
    resumed(R3, S1),
    resume(R4, S2),
    resumed(R4, S2, "not_suspended"),
    resume(R5, S2, { rollback: true }),
    resumed(R5, S2),
    check("core", { _tag: "SuspensionOutcome", request: R3, outcome: "accepted" }),
    check("core", { _tag: "SuspensionOutcome", request: R4, outcome: { rejected: "not_suspended" } }),
    check("core", { _tag: "SuspensionOutcome", request: R5, outcome: "accepted" }),
    quiesce(Q2, S2, { rollback: true, refusedByCore: "invalid_request" }),
    { ...quiesced(Q2, S2, "invalid_request"), sides: ["runtime"] },
    check("core", { _tag: "SuspensionOutcome", request: Q2, outcome: { refused: "invalid_request" } })
  ]
})
