/**
 * The opening of the end-to-end tests that run the dev Core in the test process and the real daemon binary bound
 * to a temporary workspace: the Core's layer built in its own Scope, a device credential written 0600, the
 * daemon's command line, and the scripted Session on the bound Environment once the device has declared.
 */
import { Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { realpathSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as DevCore from "../../src/core/dev/DevCore.js"
import { Operator } from "../../src/core/dev/Operator.js"
import { Ids } from "../../src/proto/index.js"
import { eventually, stopAll, tempDir } from "./devcoreLive.js"

export interface InProcessDevCore {
  readonly dir: string
  /** The daemon's workspace root (its real path). */
  readonly workspace: string
  readonly context: Context.Context<DevCore.DevCoreServices>
  readonly url: string
  readonly runIn: <A, E>(effect: Effect.Effect<A, E, DevCore.DevCoreServices>) => Promise<Exit.Exit<A, E>>
  /** `agentwire daemon …` arguments for `deviceId`, bound to the workspace, with its profile under `dir`. */
  readonly daemonArgs: ReadonlyArray<string>
  /** Resolves once the device is online with a declaration. */
  readonly declared: () => Promise<void>
  /** Creates a scripted Session of the device on the bound Environment; its id. */
  readonly createSession: () => Promise<string>
  /** Stops every process the test started, closes the Core and removes both directories. */
  readonly close: () => Promise<void>
}

export const startInProcessDevCore = async (options: {
  readonly name: string
  readonly deviceId: string
  readonly environmentId: string
  readonly operatorToken: Redacted.Redacted<string>
  /** Writes the workspace's initial files. */
  readonly seed: (workspace: string) => void
}): Promise<InProcessDevCore> => {
  const dir = tempDir(`agentwire-${options.name}-`)
  const workspace = realpathSync(tempDir(`agentwire-${options.name}-root-`))
  options.seed(workspace)
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(
    Layer.buildWithScope(DevCore.layer({ dataDir: dir, operatorToken: options.operatorToken }), scope)
  )
  const url = Context.get(context, DevCore.DevCore).url
  const operator = Context.get(context, Operator)
  const issued = await Effect.runPromise(operator.createCredential(options.deviceId))
  const credentialFile = join(dir, `${options.deviceId}.cred`)
  writeFileSync(credentialFile, Redacted.value(issued.credential) + "\n", { mode: 0o600 })
  return {
    dir,
    workspace,
    context,
    url,
    runIn: (effect) => Effect.runPromiseExit(Effect.provideContext(effect, context)),
    daemonArgs: [
      "daemon", "--core-url", url, "--device-id", options.deviceId, "--credential-file", credentialFile,
      "--profile", join(dir, "profile"), "--environment-id", options.environmentId, "--workspace", workspace
    ],
    declared: () =>
      eventually(async () => {
        const view = await Effect.runPromise(operator.getDevice(options.deviceId).pipe(Effect.option))
        return Option.isSome(view) && view.value.online && view.value.declaration !== null ? true : undefined
      }, 25_000, `${options.deviceId} online with a declaration`).then(() => undefined),
    createSession: async () =>
      (await Effect.runPromise(operator.createSession({
        agent_kind: "scripted",
        device_id: Ids.unsafeMake.deviceId(options.deviceId),
        environment: { type: "self_hosted", id: options.environmentId, workspace_directory: workspace }
      }))).session_id,
    close: async () => {
      await stopAll()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      rmSync(dir, { recursive: true, force: true })
      rmSync(workspace, { recursive: true, force: true })
    }
  }
}
