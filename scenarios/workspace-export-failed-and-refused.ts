import { release, SessionA, status } from "./Fixtures.js"
import { check, connect, scenario } from "./WireScenario.js"
import { b64, boundHeartbeat, exportBegin, exportNext, exportResult, readOnlyPrepare } from "./Workspace.js"

export default scenario({
  name: "workspace-export-failed-and-refused",
  description:
    "The Runtime ends an export itself: failed / export_failed at the offset it reached (a read error, the " +
    "archive bound or its 180 s budget) is a definite failure, never retried; failed / invalid_request answers a " +
    "next at another offset. A begin the Runtime cannot serve (another export, a write, a handle that is not a " +
    "ready read-only preparation) is rejected / resource_unavailable and nothing is held for its id.",
  sections: ["Workspace operations"],
  replay: {
    runtime: {
      skip: "the runtime runner has no workspace fixture; the daemon's side of these receipts is proven over a real " +
        "workspace in test/runtime/workspace/Exports.test.ts"
    },
    core: { asserts: "failed ends the export as failed (no cancel, no retry); rejected is a definite refusal" }
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
    exportResult("exp-1", { outcome: "failed", offset: 4, error_code: "export_failed" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-1", outcome: "failed" }),
    exportBegin("exp-2", "prep-ro"),
    exportResult("exp-2", { outcome: "rejected", offset: 0, error_code: "resource_unavailable" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-2", outcome: { rejected: "resource_unavailable" } }),
    release("prep-ro"),
    status("prep-ro", 3, "released")
  ]
})
