import { release, SessionA, status } from "./Fixtures.js"
import { check, scenario } from "./WireScenario.js"
import { b64, boundReadOnlyReady, readBytes, readDirectory, readResult } from "./Workspace.js"

export default scenario({
  name: "workspace-read-bytes-and-directory",
  description:
    "An idle read: Core prepares the read-only profile (exactly the bound Environment, nothing else), reads bytes " +
    "and one directory level on the ready handle with the exact Environment id, each reply routed by its operation " +
    "id, a refusal carried as its code; then releases the handle.",
  sections: ["Workspace operations", "Capability admission"],
  setup: { workspace: {} },
  replay: {
    runtime: { asserts: "over the fixture tree: the file's bytes, the sorted listing (symlink listed, not followed), not_found, not_directory" },
    core: { asserts: "the read-only prepare, the exact read frames, completed / rejected outcomes per operation id, the release" }
  },
  steps: [
    ...boundReadOnlyReady("prep-ro", SessionA),
    readBytes("read-1", "prep-ro", "README.md", 64),
    readResult("read-1", { outcome: "completed", data: b64("hello"), close_acknowledged: true }),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-1", outcome: "completed" }),
    readDirectory("read-2", "prep-ro", "", 16),
    readResult("read-2", {
      outcome: "completed",
      close_acknowledged: true,
      directory: {
        entries: [
          { name: "README.md", kind: "file", size_bytes: 5 },
          { name: "link", kind: "symlink", size_bytes: null },
          { name: "notes", kind: "directory", size_bytes: null },
          { name: "src", kind: "directory", size_bytes: null }
        ],
        truncated: false
      }
    }),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-2", outcome: "completed" }),
    readBytes("read-3", "prep-ro", "missing.txt", 64),
    readResult("read-3", { outcome: "rejected", error_code: "not_found" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-3", outcome: { rejected: "not_found" } }),
    readDirectory("read-4", "prep-ro", "README.md", 16),
    readResult("read-4", { outcome: "rejected", error_code: "not_directory" }),
    check("core", { _tag: "WorkspaceOutcome", operation: "read-4", outcome: { rejected: "not_directory" } }),
    release("prep-ro"),
    status("prep-ro", 3, "released"),
    check("core", { _tag: "PreparationObserved", request: "prep-ro", states: ["preparing", "ready", "released"] })
  ]
})
