import { SessionA } from "./Fixtures.js"
import { check, connect, scenario } from "./WireScenario.js"
import { boundHeartbeat, writeBegin, writeChunk, writeCommit, writeResult } from "./Workspace.js"

const W1 = "c0ffee00-1234-4abc-9def-000000000001"
const W2 = "c0ffee00-1234-4abc-9def-000000000002"
const Hello = "hello, workspace\n"
const HelloSha = "156691e632a81c969411803d5badddbbd0dd59293bc233556c8cb8de1bbe9095"
/** An empty body (its chunks never go out: the begin is refused). */
const EmptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

export default scenario({
  name: "workspace-write-transfer",
  description:
    "A write under its durable mutation id: begin (Environment, Session, path, size, SHA-256) / ready, each chunk " +
    "at the exact offset / received with the new total, commit / completed with the full size. A destination " +
    "that is a directory is an exact write_rejected with its reason, which releases the mutation owner.",
  sections: ["Workspace operations", "What each acknowledgement proves"],
  setup: { workspace: {} },
  replay: {
    runtime: { asserts: "over the fixture tree: ready, each received total, completed; an existing directory is destination_directory" },
    core: { asserts: "the exact begin / chunk / commit frames, completed; then a definite rejection with its code" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    writeBegin(W1, SessionA, "notes/hello.txt", Hello, HelloSha),
    writeResult(W1, { outcome: "ready" }),
    writeChunk(W1, 0, Hello),
    writeResult(W1, { outcome: "received", offset: 17 }),
    writeCommit(W1),
    writeResult(W1, { outcome: "completed", size_bytes: 17 }),
    check("core", { _tag: "WorkspaceOutcome", operation: W1, outcome: "completed" }),
    writeBegin(W2, SessionA, "notes", "", EmptySha),
    writeResult(W2, { outcome: "rejected", error_code: "write_rejected", reason: "destination_directory" }),
    check("core", { _tag: "WorkspaceOutcome", operation: W2, outcome: { rejected: "write_rejected" } })
  ]
})
