/**
 * The dev Core as the scale suite measures it (`gateway-host` mode `devcore`): the whole `DevCore.layer` (the
 * gateway, the operator API and the SQLite store in a throwaway data directory, with the declaration
 * persistence a production Core runs), with every bench device and the digest of its credential written to
 * the store before the first connection. The operator token is random per run and travels nowhere.
 */
import { Array as Arr, Effect, Layer, Logger, ManagedRuntime, Redacted, References } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { digestCredential } from "../../src/core/DeviceCredentials.js"
import * as DevCore from "../../src/core/dev/DevCore.js"
import type { BenchDevice } from "./core.js"

export interface BenchDevCore {
  readonly baseUrl: string
  readonly operatorToken: string
  readonly dispose: () => Promise<void>
}

/** Starts the dev Core on 127.0.0.1 with `devices` registered. */
export const startDevCore = async (
  dataDir: string,
  devices: ReadonlyArray<BenchDevice>,
  heartbeatSeconds: number
): Promise<BenchDevCore> => {
  const operatorToken = `bench-${randomBytes(18).toString("base64url")}`
  const layer = DevCore.layer({ dataDir, operatorToken: Redacted.make(operatorToken), heartbeatSeconds }).pipe(
    Layer.provide(Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])),
    Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
  )
  const runtime = ManagedRuntime.make(layer)
  const url = await runtime.runPromise(Effect.gen(function* () {
    return (yield* DevCore.DevCore).url
  }))
  await runtime.runPromise(Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const now = Date.now()
    for (let i = 0; i < devices.length; i += 500) {
      const chunk = devices.slice(i, i + 500) as unknown as readonly [BenchDevice, ...Array<BenchDevice>]
      yield* sql.withTransaction(Effect.gen(function* () {
        yield* sql`INSERT INTO devices ${sql.insert(Arr.map(chunk, (d) => ({
          device_id: d.deviceId,
          workspace_id: "default",
          runtime_type: "agent-daemon",
          created_at_ms: now,
          revoked_at_ms: null
        })))}`
        yield* sql`INSERT INTO device_credentials ${sql.insert(Arr.map(chunk, (d) => ({
          credential_id: `bench-${d.deviceId}`,
          device_id: d.deviceId,
          digest: digestCredential(Redacted.make(d.credential)),
          created_at_ms: now,
          revoked_at_ms: null
        })))}`
      }))
    }
  }))
  return { baseUrl: url, operatorToken, dispose: () => runtime.dispose() }
}
