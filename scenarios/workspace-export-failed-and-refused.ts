import { release, SessionA, status } from "./Fixtures.js"
import { check, scenario } from "./WireScenario.js"
import { b64, b64Bytes, boundReadOnlyReady, exportBegin, exportCancel, exportNext, exportResult, fixtureTar } from "./Workspace.js"

/** The fixture's whole archive: one chunk (under 64 KiB). */
const Tar = fixtureTar()

export default scenario({
  name: "workspace-export-failed-and-refused",
  description:
    "The Runtime ends an export itself: failed / export_failed at the offset it reached (a read error, the " +
    "archive bound or its 180 s budget) is a definite failure, never retried; failed / invalid_request answers a " +
    "next at another offset. A begin the Runtime cannot serve (another export, a write, a handle that is not a " +
    "ready read-only preparation) is rejected / resource_unavailable and nothing is held for its id.",
  sections: ["Workspace operations"],
  setup: { workspace: {} },
  replay: {
    runtime: {
      asserts: "a next at another offset is failed / invalid_request at the bytes sent; a begin while another export " +
        "streams is rejected / resource_unavailable (export_failed itself needs a read error: test/runtime/workspace/Exports.test.ts)"
    },
    core: { asserts: "failed ends the export as failed (no cancel, no retry); rejected is a definite refusal" }
  },
  steps: [
    ...boundReadOnlyReady("prep-ro", SessionA),
    exportBegin("exp-1", "prep-ro"),
    { ...exportResult("exp-1", { outcome: "chunk", offset: 0, data: b64("tar-") }), sides: ["core"] },
    { ...exportResult("exp-1", { outcome: "chunk", offset: 0, data: b64Bytes(Tar) }), sides: ["runtime"] },
    exportNext("exp-1", 4),
    { ...exportResult("exp-1", { outcome: "failed", offset: 4, error_code: "export_failed" }), sides: ["core"] },
    {
      ...exportResult("exp-1", { outcome: "failed", offset: Tar.length, error_code: "invalid_request" }),
      sides: ["runtime"],
      note: "4 is not the bytes sent"
    },
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-1", outcome: "failed" }),
    { ...exportBegin("exp-3", "prep-ro"), sides: ["runtime"], note: "an export that keeps streaming" },
    { ...exportResult("exp-3", { outcome: "chunk", offset: 0, data: b64Bytes(Tar) }), sides: ["runtime"] },
    exportBegin("exp-2", "prep-ro"),
    exportResult("exp-2", { outcome: "rejected", offset: 0, error_code: "resource_unavailable" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-2", outcome: { rejected: "resource_unavailable" } }),
    { ...exportCancel("exp-3"), sides: ["runtime"] },
    release("prep-ro"),
    status("prep-ro", 3, "released")
  ]
})
