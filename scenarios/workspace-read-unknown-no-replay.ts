import { SessionA } from "./Fixtures.js"
import { check, disconnect, reconnect, scenario, silence } from "./WireScenario.js"
import { boundHeartbeat, boundReadOnlyReady, readBytes, readResult } from "./Workspace.js"

export default scenario({
  name: "workspace-read-unknown-no-replay",
  description:
    "A read the Runtime answers unknown (read_unconfirmed) stays unknown; a read in flight when the connection " +
    "drops stays unknown too, and neither side replays it (or anything else) on the next connection.",
  sections: ["Workspace operations", "Failures, retries and cleanup", "Ownership and connection"],
  setup: { workspace: { failFirstClose: ["README.md"] } },
  replay: {
    runtime: {
      asserts: "a read whose native close fails is read_unconfirmed and stops reads on that owner (resource_unavailable); " +
        "nothing is replayed on the new connection"
    },
    core: { asserts: "ReadUnknown for read_unconfirmed and for the dropped connection; nothing sent on the new connection" }
  },
  steps: [
    ...boundReadOnlyReady("prep-ro", SessionA),
    readBytes("read-1", "prep-ro", "README.md", 1024),
    readResult("read-1", { outcome: "unknown", error_code: "read_unconfirmed" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-1", outcome: "unknown" }),
    readBytes("read-2", "prep-ro", "other.bin", 1024),
    {
      ...readResult("read-2", { outcome: "rejected", error_code: "resource_unavailable" }),
      sides: ["runtime"],
      note: "the owner's earlier read is unconfirmed: no further reads on it (Core's read is still in flight here)"
    },
    disconnect(),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-2", outcome: "unknown" }),
    reconnect(),
    boundHeartbeat(),
    silence("1 minute", { note: "the read is not replayed on the new connection" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-2", outcome: "unknown" })
  ]
})
