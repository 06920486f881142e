import { SessionA } from "./Fixtures.js"
import { check, connect, scenario } from "./WireScenario.js"
import { boundHeartbeat, prepareChunk, prepareCommit, prepareFileBegin, prepareResult, prepareSetupBegin } from "./Workspace.js"

const T1 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a11"
const T2 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a12"
const T3 = "0b7e2a52-4c1d-4c36-9a53-2f7d0c1e9a13"
const Hello = "hello, workspace\n"
const HelloSha = "156691e632a81c969411803d5badddbbd0dd59293bc233556c8cb8de1bbe9095"

export default scenario({
  name: "runtime-prepare-transfer",
  description:
    "Environment initialization, one transfer at a time: a file (begin / ready, the chunk at offset 0 / received " +
    "with the new total, commit / completed with the full size), a setup command whose commit follows ready " +
    "directly and completes, and a failing setup command whose failed receipt keeps its exit code.",
  setup: { workspace: {} },
  sections: ["Preparation and execution order", "What each acknowledgement proves"],
  replay: {
    runtime: { asserts: "a daemon bound to the fixture: ready, the received total, completed at the size; setup `true` completes; `exit 2` fails with exit code 2" },
    core: { asserts: "the exact begin / chunk / commit frames, each sent only after the previous receipt; completed; failed with its exit code" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    prepareFileBegin(T1, SessionA, "/workspace/notes/hello.txt", Hello, HelloSha),
    prepareResult(T1, { outcome: "ready" }),
    prepareChunk(T1, 0, Hello),
    prepareResult(T1, { outcome: "received", offset: 17 }),
    prepareCommit(T1),
    prepareResult(T1, { outcome: "completed", size_bytes: 17 }),
    check("core", { _tag: "WorkspaceOutcome", operation: T1, outcome: "completed" }),
    prepareSetupBegin(T2, SessionA, "true"),
    prepareResult(T2, { outcome: "ready" }),
    prepareCommit(T2),
    prepareResult(T2, { outcome: "completed" }),
    check("core", { _tag: "WorkspaceOutcome", operation: T2, outcome: "completed" }),
    prepareSetupBegin(T3, SessionA, "exit 2"),
    prepareResult(T3, { outcome: "ready" }),
    prepareCommit(T3),
    prepareResult(T3, { outcome: "failed", error_code: "runtime_preparation_failed", exit_code: 2 }),
    check("core", { _tag: "WorkspaceOutcome", operation: T3, outcome: "failed" })
  ]
})
