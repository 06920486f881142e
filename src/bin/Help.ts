/**
 * How the binary reports a bad invocation and shows help (docs/operations.md "Help and errors"):
 *
 * - An unknown flag, a missing or invalid value: one line per problem on stderr, with a hint, and nothing on
 *   stdout (exit 2 through the teardown): `agentwire core: unrecognized flag --bogus (did you mean --port?); see
 *   agentwire help core`. Help is printed only when asked for (`--help`, `agentwire help CMD`) or when a
 *   command that only groups subcommands is run alone.
 * - `agentwire help [CMD …]` prints the help of that command path (it is `agentwire CMD … --help`).
 */
import { Console, Effect } from "effect"
import { Argument, CliError, CliOutput, Command } from "effect/cli"

const firstLine = (text: string) => (text.split("\n").find((l) => l.trim() !== "") ?? text).trim()

/** One line for one parse problem, without the help text. */
export const problemLine = (commandPath: ReadonlyArray<string>, error: CliError.NonShowHelpErrors): string => {
  const where = commandPath.join(" ")
  const hint = `see ${["agentwire", "help", ...commandPath.slice(1)].join(" ")}`
  if (error._tag === "UnrecognizedOption") {
    const suggest = error.suggestions.length > 0 ? ` (did you mean ${error.suggestions.slice(0, 3).join(", ")}?)` : ""
    return `${where}: unrecognized flag ${error.option}${suggest}; ${hint}`
  }
  const message = firstLine(error.message)
  return `${where}: ${message.charAt(0).toLowerCase()}${message.slice(1)}; ${hint}`
}

/** The presenter: invalid invocations as one line each on stderr; everything else as the default does. */
export const presenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Effect.forEach(event.errors, (error) => Console.error(problemLine(event.commandPath, error)), { discard: true })
      : CliOutput.defaultPresenter.present(event)
}

/** `agentwire help [CMD …]` is rewritten to `CMD … --help` before parsing (see `helpArgs`). */
export const helpArgs = (argv: ReadonlyArray<string>): ReadonlyArray<string> =>
  argv[0] === "help" ? [...argv.slice(1), "--help"] : argv

/** The `help` subcommand, listed for discovery; `helpArgs` answers it before the parser sees it. */
export const helpCommand = Command.make(
  "help",
  { path: Argument.String("command").pipe(Argument.withDescription("The command (and subcommands) to explain"), Argument.variadic()) },
  () => Effect.void
).pipe(
  Command.withDescription("Show the help of a command: agentwire help core credential"),
  Command.withExamples([{ command: "agentwire help turn start" }, { command: "agentwire help daemon" }])
)

/** `Command.withExamples` from command lines (every command's help shows at least one, test/e2e/cli-help.live.test.ts). */
export const examples = (...commands: ReadonlyArray<string>) => Command.withExamples(commands.map((command) => ({ command })))
