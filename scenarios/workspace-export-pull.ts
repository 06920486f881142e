import { release, SessionA, status } from "./Fixtures.js"
import { check, scenario, silence } from "./WireScenario.js"
import { b64, b64Bytes, boundReadOnlyReady, exportBegin, exportCancel, exportNext, exportResult, fixtureTar } from "./Workspace.js"

/** The fixture's whole archive: one chunk (under 64 KiB). */
const Tar = fixtureTar()

export default scenario({
  name: "workspace-export-pull",
  description:
    "Export is pull-based on a ready read-only handle: each reply starts at exactly the offset Core counted, Core " +
    "asks for the next chunk only after consuming the previous one, and completed (no data) ends it. A reply at " +
    "another offset stops the export: Core sends cancel (no reply) and the outcome is unknown.",
  sections: ["Workspace operations"],
  setup: { workspace: {} },
  replay: {
    runtime: {
      asserts: "over the fixture tree: the exact archive from offset 0, completed at its size; cancel gets no reply and " +
        "the handle's release waits for the export's close"
    },
    core: { asserts: "begin / next at the exact offsets / completed; the wrong offset is answered with cancel" }
  },
  steps: [
    ...boundReadOnlyReady("prep-ro", SessionA),
    exportBegin("exp-1", "prep-ro"),
    { ...exportResult("exp-1", { outcome: "chunk", offset: 0, data: b64("tar-") }), sides: ["core"] },
    { ...exportNext("exp-1", 4), sides: ["core"] },
    { ...exportResult("exp-1", { outcome: "chunk", offset: 4, data: b64("data") }), sides: ["core"] },
    { ...exportNext("exp-1", 8), sides: ["core"] },
    { ...exportResult("exp-1", { outcome: "completed", offset: 8 }), sides: ["core"] },
    { ...exportResult("exp-1", { outcome: "chunk", offset: 0, data: b64Bytes(Tar) }), sides: ["runtime"] },
    { ...exportNext("exp-1", Tar.length), sides: ["runtime"] },
    { ...exportResult("exp-1", { outcome: "completed", offset: Tar.length }), sides: ["runtime"] },
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-1", outcome: "completed" }),
    exportBegin("exp-2", "prep-ro"),
    { ...exportResult("exp-2", { outcome: "chunk", offset: 3, data: b64("zz") }), sides: ["core"], note: "not at Core's count (0)" },
    { ...exportResult("exp-2", { outcome: "chunk", offset: 0, data: b64Bytes(Tar) }), sides: ["runtime"] },
    exportCancel("exp-2"),
    silence("1 second", { note: "cancel gets no reply", sides: ["runtime"] }),
    check("core", { _tag: "WorkspaceOutcome", operation: "exp-2", outcome: "unknown" }),
    release("prep-ro"),
    status("prep-ro", 3, "released")
  ]
})
