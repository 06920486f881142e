/**
 * `agentwire core credential create|revoke`: daemon credentials in a dev Core's data directory.
 *
 *   agentwire core credential create --device-id ID [--data-dir DIR] [--output FILE] [--init]
 *   agentwire core credential revoke --device-id ID [--data-dir DIR] [--operator-token-file PATH]
 *
 * Both refuse a data directory that holds no store (`agentwire.db`): a mistyped `--data-dir` must not create a
 * new, empty store. `create --init` creates it on purpose.
 *
 * `create` prints the credential once, alone on stdout; with `--output FILE` it is written to FILE instead
 * (a new file with mode 0600 in FILE's directory, renamed over FILE: never readable by others, not even for a
 * moment) and stdout says where it went. Only its digest is stored.
 *
 * `revoke` goes through the running Core when one holds the data directory's lock (its operator API revokes
 * and closes the device's live connection, and the command says whether one was closed); otherwise it
 * revokes in the store and says that no Core was running, so no connection was open.
 */
import { Console, Effect, type FileSystem, Option, Redacted, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { randomBytes } from "node:crypto"
import * as DataDirLock from "../../core/dev/DataDirLock.js"
import { DeviceStore } from "../../core/dev/DeviceStore.js"
import * as Store from "../../core/dev/Store.js"
import type { StoreFailed } from "../../core/dev/StoreErrors.js"
import { Ids } from "../../proto/index.js"
import { CommandFailed, ExitCode } from "../Exit.js"
import { examples } from "../Help.js"
import * as OperatorClient from "../OperatorClient.js"

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })
const failure = (text: string) => new CommandFailed({ text, exitCode: ExitCode.failure })

const isDeviceId = Schema.is(Ids.DeviceId)
export const checkDeviceId = (deviceId: string) =>
  isDeviceId(deviceId) ? Effect.void : Effect.fail(usage("--device-id must be non-blank and at most 128 bytes"))

/** Refuses a data directory without a store unless `init` (no new store behind a typo). */
export const requireStore = (dataDir: string, init: boolean) =>
  init || existsSync(Store.databaseFile(dataDir))
    ? Effect.void
    : Effect.fail(usage(
      `no agentwire store in ${dataDir} (no ${basename(Store.databaseFile(dataDir))}); check --data-dir, or pass --init to create one`
    ))

/**
 * Writes `content` to `file` atomically with mode 0600: a new temporary file (exclusive create, 0600) in the
 * same directory, flushed, then renamed over `file`. A failure removes the temporary file.
 */
export const writeSecretFile = (file: string, content: string) =>
  Effect.try({
    try: () => {
      const target = resolve(file)
      const temp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`)
      const fd = openSync(temp, "wx", 0o600)
      try {
        writeSync(fd, content)
        fsyncSync(fd)
      } catch (cause) {
        closeSync(fd)
        rmSync(temp, { force: true })
        throw cause
      }
      closeSync(fd)
      try {
        renameSync(temp, target)
      } catch (cause) {
        rmSync(temp, { force: true })
        throw cause
      }
    },
    catch: (cause) => failure(`cannot write ${file}: ${(cause as { code?: string }).code ?? "unknown error"}`)
  })

export interface CredentialCommandOptions {
  readonly dataDirFlag: Flag.Flag<Option.Option<string>>
  readonly dataDirOf: (flag: Option.Option<string>) => string
  /** Opens the store of a data directory for one effect. */
  readonly withStore: <A, E>(dataDir: string, effect: Effect.Effect<A, E, Store.StoreServices>) => Effect.Effect<A, E | CommandFailed>
  /** The operator token of a data directory (flag, environment, or its token file). */
  readonly operatorToken: (dataDir: string, tokenFile: Option.Option<string>) => Effect.Effect<
    { readonly token: Redacted.Redacted<string> },
    CommandFailed,
    FileSystem.FileSystem
  >
}

const deviceIdFlag = Flag.String("device-id").pipe(Flag.withDescription("(required) The device the credential belongs to"))

export const makeCredentialCommand = (options: CredentialCommandOptions) => {
  const storeFailed = <A, R>(effect: Effect.Effect<A, StoreFailed | CommandFailed, R>) =>
    Effect.mapError(effect, (e) => (e._tag === "StoreFailed" ? failure(e.message) : e))

  const create = Command.make(
    "create",
    {
      deviceId: deviceIdFlag,
      dataDir: options.dataDirFlag,
      output: Flag.String("output").pipe(
        Flag.withDescription("Write the credential to this file (mode 0600, atomically) instead of stdout"),
        Flag.optional
      ),
      init: Flag.Boolean("init").pipe(
        Flag.withDescription("Create the store when the data directory has none (otherwise that is an error)"),
        Flag.withDefault(false)
      )
    },
    (input) =>
      Effect.gen(function* () {
        yield* checkDeviceId(input.deviceId)
        const dataDir = options.dataDirOf(input.dataDir)
        yield* requireStore(dataDir, input.init)
        const credential = yield* options.withStore(
          dataDir,
          Effect.gen(function* () {
            return yield* (yield* DeviceStore).issueCredential(input.deviceId)
          })
        ).pipe(storeFailed)
        const value = Redacted.value(credential)
        if (Option.isSome(input.output)) {
          yield* writeSecretFile(input.output.value, value + "\n")
          yield* Console.log(`wrote the credential of device ${input.deviceId} to ${input.output.value} (mode 0600)`)
          return
        }
        // The one place this credential is ever shown: stdout, alone on its line.
        yield* Console.log(value)
      })
  ).pipe(
    Command.withDescription(
      "Create (or replace) a device's daemon credential; prints it once (or writes it to --output FILE, mode 0600). Only its digest is stored."
    ),
    Command.withExamples([
      { command: "agentwire core credential create --device-id laptop --output laptop.credential", description: "into a 0600 file" },
      { command: "agentwire core credential create --device-id laptop --data-dir ./core --init", description: "in a new data directory" }
    ])
  )

  const revoke = Command.make(
    "revoke",
    {
      deviceId: deviceIdFlag,
      dataDir: options.dataDirFlag,
      operatorTokenFile: Flag.String("operator-token-file").pipe(
        Flag.withDescription("The running Core's operator token file (default as for `agentwire core`)"),
        Flag.optional
      )
    },
    (input) =>
      Effect.gen(function* () {
        yield* checkDeviceId(input.deviceId)
        const dataDir = options.dataDirOf(input.dataDir)
        yield* requireStore(dataDir, false)
        const live = yield* DataDirLock.probe(dataDir).pipe(Effect.mapError((e) => failure(e.message)))
        if (Option.isSome(live)) {
          const url = live.value.url
          if (url === undefined) return yield* failure(`a Core holds ${dataDir} but has not published its address yet; try again`)
          const { token } = yield* options.operatorToken(dataDir, input.operatorTokenFile)
          const reply = yield* OperatorClient.call({ url, token }, "DELETE", `/devices/${encodeURIComponent(input.deviceId)}/credential`).pipe(
            Effect.mapError((e) => failure(`${e.message}; the credential may or may not be revoked: check with agentwire devices show ${input.deviceId}`))
          )
          if (reply.status === 404) return yield* usage(`unknown device ${input.deviceId}`)
          if (reply.status !== 200) return yield* failure(`the running Core at ${url} refused the revoke: ${OperatorClient.errorLine(reply)}`)
          const disconnected = (reply.body as { readonly disconnected?: unknown } | undefined)?.disconnected === true
          yield* Console.log(
            `revoked the credentials of device ${input.deviceId} through the running Core at ${url}; ` +
              (disconnected ? "its live connection was closed" : "it was not connected")
          )
          return
        }
        const known = yield* options.withStore(
          dataDir,
          Effect.gen(function* () {
            return yield* (yield* DeviceStore).revoke(input.deviceId)
          })
        ).pipe(storeFailed)
        if (!known) return yield* usage(`unknown device ${input.deviceId}`)
        yield* Console.log(
          `revoked the credentials of device ${input.deviceId}; no Core is running on ${dataDir}, so it had no open connection`
        )
      })
  ).pipe(
    Command.withDescription(
      "Revoke a device's credentials. With a Core running on the data directory it goes through that Core, which also closes the device's live connection; the output says whether one was closed."
    ),
    examples("agentwire core credential revoke --device-id laptop-1 --data-dir ./core-data")
  )

  return Command.make("credential").pipe(
    Command.withDescription("Manage daemon credentials in a data directory"),
    Command.withSubcommands([create, revoke]),
    examples(
      "agentwire core credential create --device-id laptop-1 --data-dir ./core-data --output laptop-1.cred",
      "agentwire core credential revoke --device-id laptop-1 --data-dir ./core-data"
    )
  )
}
