/**
 * The agentwire binary: the only place with process-level effects (argv, signals, exit codes).
 * Subcommands live in ./commands, one module each; Root.ts assembles them; this file only runs them.
 */
import { NodeRuntime } from "@effect/platform-node"
import { teardown } from "./Exit.js"
import { invoke } from "./Root.js"
import * as Signals from "./Signals.js"

// A closed terminal (SIGHUP) stops every command like SIGTERM does: the main fiber is interrupted and every
// finalizer (children, temporary directories, confirmed cleanup) runs. runMain handles SIGINT and SIGTERM.
Signals.install()
process.on("SIGHUP", () => {
  Signals.record("SIGHUP")
  process.kill(process.pid, "SIGTERM")
})

NodeRuntime.runMain(invoke(process.argv.slice(2)), { teardown })
