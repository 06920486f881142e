/**
 * The agentwire binary: the only place with process-level effects (argv, signals, exit codes).
 * Subcommands live in ./commands, one module each; this file only assembles and runs them.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, Layer, Runtime } from "effect"
import { CliOutput, Command } from "effect/cli"
import * as Os from "node:os"
import { ProtocolVersion } from "../proto/Version.js"
import { AgentwireVersion } from "./BuildInfo.js"
import { conformanceCommand } from "./commands/conformance.js"
import { coreCommand, defaultDataDir } from "./commands/core.js"
import { daemonCommand } from "./commands/daemon.js"
import { demoCommand } from "./commands/demo.js"
import { makeOperatorCommands } from "./commands/operator.js"
import { statusCommand } from "./commands/status.js"
import { expandDaemonConfig } from "./DaemonConfigFile.js"
import { teardown } from "./Exit.js"
import * as Signals from "./Signals.js"
import { examples, helpArgs, helpCommand, presenter } from "./Help.js"

const operator = makeOperatorCommands({ defaultDataDir: defaultDataDir(Os.homedir()) })

const version = `${AgentwireVersion} (wire ${ProtocolVersion})`

const root = Command.make("agentwire").pipe(
  Command.withDescription(
    "Core <-> Runtime daemon protocol (wire " + ProtocolVersion + "): runtime daemon, dev Core, operator client, status and conformance kit"
  ),
  Command.withSubcommands([
    daemonCommand,
    statusCommand,
    coreCommand,
    demoCommand,
    conformanceCommand,
    operator.devices,
    operator.sessions,
    operator.turns,
    operator.turn,
    operator.files,
    helpCommand
  ]),
  examples("agentwire demo", "agentwire core --port 7400", "agentwire help daemon", "agentwire --completions bash > /etc/bash_completion.d/agentwire")
)

// `agentwire help CMD …` is `agentwire CMD … --help`; parse problems are one line each on stderr (Help.ts).
// `agentwire daemon --config FILE` adds the file's keys as flags the command line does not set (DaemonConfigFile.ts).
const program = expandDaemonConfig(helpArgs(process.argv.slice(2))).pipe(
  // Printed here as one line; marked reported so runMain does not log it again.
  Effect.tapError((error) => Console.error(error.text).pipe(Effect.andThen(Effect.sync(() => Object.assign(error, { [Runtime.errorReported]: false }))))),
  Effect.flatMap((args) => Command.runWith(root, { version })(args)),
  Effect.provide(Layer.merge(NodeServices.layer, CliOutput.layerPresenter(presenter)))
)

// A closed terminal (SIGHUP) stops every command like SIGTERM does: the main fiber is interrupted and every
// finalizer (children, temporary directories, confirmed cleanup) runs. runMain handles SIGINT and SIGTERM.
Signals.install()
process.on("SIGHUP", () => {
  Signals.record("SIGHUP")
  process.kill(process.pid, "SIGTERM")
})

NodeRuntime.runMain(program, { teardown })
