/**
 * The real daemon in the bench process, bound to a temporary workspace: `Daemon.run` with the production
 * `Connector` dialing the bench's gateway, `RuntimeProcess` with the Environment binding, warnings and above
 * to stderr. Used by the suites that measure one process end to end (transfer, workspace).
 */
import { Effect, Fiber, Layer, Logger, Redacted, References } from "effect"
import * as Daemon from "../../src/runtime/Daemon.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { Connector } from "../../src/runtime/transport/Connector.js"
import { Ids } from "../../src/proto/index.js"
import { ProtocolVersion } from "../../src/proto/Version.js"
import type { BenchDevice, Core } from "./core.js"

export interface InProcessDaemon {
  /** Interrupts the daemon (its scopes close: connection, Executors, workspace operations). */
  readonly stop: () => Promise<void>
}

/** Starts the daemon for `device`, bound to `workspace` (a real path) as Environment `environmentId`. */
export const startInProcessDaemon = (core: Core, device: BenchDevice, environmentId: string, workspace: string): InProcessDaemon => {
  const deviceId = Ids.unsafeMake.deviceId(device.deviceId)
  const fiber = Effect.runFork(
    Daemon.run({ deviceId, coreOrigin: core.baseUrl }).pipe(
      Effect.provide(Layer.mergeAll(
        Connector.layer({ apiBase: `${core.baseUrl}/api/v1`, deviceId, credential: Redacted.make(device.credential), userAgent: "agentwire-bench" }),
        RuntimeProcess.layer({ environment: { environmentId, root: workspace, configured: workspace, networkAccess: "disabled" } }),
        StatusBoard.layer({ daemonVersion: "bench", wireVersion: ProtocolVersion, pid: process.pid, deviceId, coreUrl: core.baseUrl }),
        Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)]),
        Layer.succeed(References.MinimumLogLevel, "Warn")
      ))
    )
  )
  return { stop: () => Effect.runPromise(Fiber.interrupt(fiber)).then(() => undefined) }
}
