/**
 * The agentwire binary: the only place with process-level effects (argv, signals, exit codes).
 * Subcommands live in ./commands, one module each; this file only assembles and runs them.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { Command } from "effect/cli"
import { ProtocolVersion } from "../proto/Version.js"
import { AgentwireVersion } from "./BuildInfo.js"

const root = Command.make("agentwire").pipe(
  Command.withDescription(
    "Core <-> Runtime daemon protocol (wire " + ProtocolVersion + "): runtime daemon, dev Core, status and conformance kit"
  ),
  Command.withSubcommands([])
)

const program = Command.run(root, { version: `${AgentwireVersion} (wire ${ProtocolVersion})` }).pipe(
  Effect.provide(NodeServices.layer)
)

NodeRuntime.runMain(program)
