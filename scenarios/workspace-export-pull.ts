import { release, SessionA, status } from "./Fixtures.js"
import { check, connect, scenario } from "./WireScenario.js"
import { b64, boundHeartbeat, exportBegin, exportCancel, exportNext, exportResult, readOnlyPrepare } from "./Workspace.js"

export default scenario({
  name: "workspace-export-pull",
  description:
    "Export is pull-based on a ready read-only handle: each reply starts at exactly the offset Core counted, Core " +
    "asks for the next chunk only after consuming the previous one, and completed (no data) ends it. A reply at " +
    "another offset stops the export: Core sends cancel (no reply) and the outcome is unknown.",
  sections: ["Workspace operations"],
  replay: {
    runtime: {
      skip: "the runtime runner has no workspace fixture (exact tar bytes depend on the tree); the daemon's side is " +
        "proven over a real workspace in test/runtime/workspace/Exports.test.ts"
    },
    core: { asserts: "begin / next at the exact offsets / completed; the wrong offset is answered with cancel" }
  },
  steps: [
    connect(),
    boundHeartbeat(),
    readOnlyPrepare("prep-ro", SessionA),
    status("prep-ro", 1, "preparing"),
    status("prep-ro", 2, "ready"),
    exportBegin("exp-1", "prep-ro"),
    exportResult("exp-1", { outcome: "chunk", offset: 0, data: b64("tar-") }),
    exportNext("exp-1", 4),
    exportResult("exp-1", { outcome: "chunk", offset: 4, data: b64("data") }),
    exportNext("exp-1", 8),
    exportResult("exp-1", { outcome: "completed", offset: 8 }),
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-1", outcome: "completed" }),
    exportBegin("exp-2", "prep-ro"),
    { ...exportResult("exp-2", { outcome: "chunk", offset: 3, data: b64("zz") }), sides: ["core"], note: "not at Core's count (0)" },
    { ...exportCancel("exp-2"), sides: ["core"] },
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-2", outcome: "unknown" }),
    release("prep-ro"),
    status("prep-ro", 3, "released")
  ]
})
