/**
 * The agentwire command tree and how one invocation runs over it (argv in, exit through the caller), without
 * any process-level effect: the binary (agentwire.ts) runs it under `NodeRuntime.runMain`, and tests run it
 * in process (test/bin/Help.test.ts).
 */
import { NodeServices } from "@effect/platform-node"
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
import { examples, helpArgs, helpCommand, presenter } from "./Help.js"

const operator = makeOperatorCommands({ defaultDataDir: defaultDataDir(Os.homedir()) })

export const version = `${AgentwireVersion} (wire ${ProtocolVersion})`

export const root = Command.make("agentwire").pipe(
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

/**
 * One invocation: `agentwire help CMD …` is `agentwire CMD … --help`; parse problems are one line each on stderr
 * (Help.ts); `agentwire daemon --config FILE` adds the file's keys as flags the command line does not set
 * (DaemonConfigFile.ts).
 */
export const invoke = (argv: ReadonlyArray<string>) =>
  expandDaemonConfig(helpArgs(argv)).pipe(
    // Printed here as one line; marked reported so runMain does not log it again.
    Effect.tapError((error) => Console.error(error.text).pipe(Effect.andThen(Effect.sync(() => Object.assign(error, { [Runtime.errorReported]: false }))))),
    Effect.flatMap((args) => Command.runWith(root, { version })(args)),
    Effect.provide(Layer.merge(NodeServices.layer, CliOutput.layerPresenter(presenter)))
  )
