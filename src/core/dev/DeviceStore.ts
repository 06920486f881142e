/**
 * Devices, their daemon credentials and their latest declaration, over `effect/sql` (docs/store.md).
 *
 * Credentials: only SHA-256 digests are stored; a presented credential is compared in constant time against
 * the device's active digests, and a credential authenticates exactly its own device. Issuing a credential
 * revokes the device's earlier ones (one active credential per device). Revoking marks the device and its
 * credentials revoked; the next authentication fails with `bad_credential`.
 *
 * Declarations: the latest valid heartbeat per device (daemon version, active requests, its `ts`, when Core
 * received it) and one row per declared kind with availability, version and the persisted capability
 * projection. They are liveness facts and a cache for listing; admission always uses the live connection's
 * declaration, never this table.
 */
import { Array as Arr, Clock, Context, Effect, Layer, Option, Redacted, Result } from "effect"
import { SqlClient } from "effect/sql"
import * as Capabilities from "../../proto/Capabilities.js"
import {
  AgentDaemonRuntimeType,
  CredentialPrefix,
  CredentialRejected,
  CredentialStoreFailed,
  DeviceCredentials,
  type DeviceRecord,
  digestCredential,
  digestsEqual,
  generateCredential
} from "../DeviceCredentials.js"
import type { Declaration } from "../DeviceSession.js"
import { DevIds } from "./DevIds.js"
import * as SqlBatch from "./SqlBatch.js"
import { StoreFailed, storeFailed, toBool, toInt, toIntOrUndefined, toStringOrUndefined } from "./StoreErrors.js"

/** The workspace every dev Core device belongs to. */
export const DefaultWorkspaceId = "default"

export interface StoredKind {
  readonly kind: string
  readonly available: boolean
  readonly version: string | undefined
  /** `None` when the stored projection is incomplete (written before a field existed): unknown, admits nothing. */
  readonly capabilities: Option.Option<Capabilities.AgentKindCapabilities>
}

export interface StoredDeclaration {
  readonly connectionNumber: number
  readonly daemonVersion: string | undefined
  readonly activeRequests: number
  readonly heartbeatTs: number
  readonly receivedAtMs: number
  readonly kinds: ReadonlyArray<StoredKind>
}

export interface StoredDevice {
  readonly deviceId: string
  readonly workspaceId: string
  readonly runtimeType: string
  readonly createdAtMs: number
  readonly revokedAtMs: number | undefined
  readonly hasActiveCredential: boolean
  /** `None` before the first heartbeat this store recorded. */
  readonly declaration: Option.Option<StoredDeclaration>
}

/**
 * One change to the stored declarations, as `persistDeclarations` writes them in one transaction:
 * - `Record`: the whole declaration (it changed, or a new connection sent its first heartbeat);
 * - `Liveness`: only the liveness facts of an unchanged declaration (its latest `ts`, receive time and active
 *   requests), written when its connection ends;
 * - `Clear`: forget it (the connection ended on an invalid heartbeat).
 */
export type DeclarationChange =
  | {
    readonly _tag: "Record"
    readonly deviceId: string
    readonly connectionNumber: number
    readonly declaration: Declaration
  }
  | {
    readonly _tag: "Liveness"
    readonly deviceId: string
    readonly activeRequests: number
    readonly heartbeatTs: number
    readonly receivedAtMs: number
  }
  | { readonly _tag: "Clear"; readonly deviceId: string }

export class DeviceStore extends Context.Service<DeviceStore, {
  /**
   * Creates the device when missing (workspace `default`, runtime type `agent-daemon`), revokes its earlier
   * credentials and stores the digest of a fresh one, in one transaction. The credential is returned once
   * and exists nowhere else; the caller owns showing it.
   */
  readonly issueCredential: (deviceId: string) => Effect.Effect<Redacted.Redacted<string>, StoreFailed>
  /** Revokes the device's credentials. Succeeds with false when the device is unknown. */
  readonly revoke: (deviceId: string) => Effect.Effect<boolean, StoreFailed>
  /** Authenticates a presented credential for exactly this device (see DeviceCredentials). */
  readonly authenticate: (
    deviceId: string,
    credential: Redacted.Redacted<string>
  ) => Effect.Effect<DeviceRecord, CredentialRejected | StoreFailed>
  /** The device an active credential belongs to, fully checked (see DeviceCredentials.identify). */
  readonly identify: (credential: Redacted.Redacted<string>) => Effect.Effect<DeviceRecord, CredentialRejected | StoreFailed>
  /** Replaces the device's stored declaration with a connection's latest valid heartbeat. */
  readonly recordDeclaration: (
    deviceId: string,
    connectionNumber: number,
    declaration: Declaration
  ) => Effect.Effect<void, StoreFailed>
  /** Forgets the stored declaration (an invalid heartbeat cleared the connection's snapshot). */
  readonly clearDeclaration: (deviceId: string) => Effect.Effect<void, StoreFailed>
  /** Writes several declaration changes, in order, in one transaction (group commit): all or none. */
  readonly persistDeclarations: (changes: ReadonlyArray<DeclarationChange>) => Effect.Effect<void, StoreFailed>
  readonly get: (deviceId: string) => Effect.Effect<Option.Option<StoredDevice>, StoreFailed>
  readonly list: Effect.Effect<ReadonlyArray<StoredDevice>, StoreFailed>
  /** Up to `limit` devices after `after`, in (created_at_ms, device_id) order (keyset paging on an index). */
  readonly listPage: (after: Option.Option<DeviceKey>, limit: number) => Effect.Effect<ReadonlyArray<StoredDevice>, StoreFailed>
}>()("agentwire/core/dev/DeviceStore") {}

/** A device's position in listing order. */
export interface DeviceKey {
  readonly createdAtMs: number
  readonly deviceId: string
}

const readKind = (row: Record<string, unknown>): StoredKind => {
  const projection: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(row)) {
    if (key.startsWith("cap_")) projection[key] = toBool(value)
  }
  const caps = Capabilities.fromPersistedProjection(projection)
  return {
    kind: String(row.kind),
    available: toBool(row.available) === true,
    version: toStringOrUndefined(row.version),
    capabilities: Result.isSuccess(caps) ? Option.some(caps.success) : Option.none()
  }
}

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const batch = yield* SqlBatch.current
  const ids = yield* DevIds

  const issueCredential = Effect.fn("DeviceStore.issueCredential")(function* (deviceId: string) {
    const now = yield* Clock.currentTimeMillis
    const credentialId = yield* ids.next("credential")
    const credential = generateCredential()
    const digest = digestCredential(credential)
    yield* sql.withTransaction(Effect.gen(function* () {
      yield* sql`INSERT INTO devices (device_id, workspace_id, runtime_type, created_at_ms, revoked_at_ms)
        VALUES (${deviceId}, ${DefaultWorkspaceId}, ${AgentDaemonRuntimeType}, ${now}, NULL)
        ON CONFLICT (device_id) DO UPDATE SET revoked_at_ms = NULL`
      yield* sql`UPDATE device_credentials SET revoked_at_ms = ${now}
        WHERE device_id = ${deviceId} AND revoked_at_ms IS NULL`
      yield* sql`INSERT INTO device_credentials (credential_id, device_id, digest, created_at_ms, revoked_at_ms)
        VALUES (${credentialId}, ${deviceId}, ${digest}, ${now}, NULL)`
    })).pipe(storeFailed("issue_credential"))
    return credential
  })

  const revoke = Effect.fn("DeviceStore.revoke")(function* (deviceId: string) {
    const now = yield* Clock.currentTimeMillis
    return yield* sql.withTransaction(Effect.gen(function* () {
      const rows = yield* sql`SELECT device_id FROM devices WHERE device_id = ${deviceId}`
      if (rows.length === 0) return false
      yield* sql`UPDATE device_credentials SET revoked_at_ms = ${now}
        WHERE device_id = ${deviceId} AND revoked_at_ms IS NULL`
      yield* sql`UPDATE devices SET revoked_at_ms = ${now} WHERE device_id = ${deviceId} AND revoked_at_ms IS NULL`
      return true
    })).pipe(storeFailed("revoke_credential"))
  })

  const authenticate = Effect.fn("DeviceStore.authenticate")(function* (
    deviceId: string,
    credential: Redacted.Redacted<string>
  ) {
    const devices = yield* sql`SELECT workspace_id, runtime_type, revoked_at_ms FROM devices
      WHERE device_id = ${deviceId}`.pipe(storeFailed("authenticate"))
    const device = devices[0]
    if (device === undefined) return yield* new CredentialRejected({ code: "unknown_device" })
    const stored = yield* sql`SELECT digest FROM device_credentials
      WHERE device_id = ${deviceId} AND revoked_at_ms IS NULL`.pipe(storeFailed("authenticate"))
    const presented = digestCredential(credential)
    // Compare against every active digest (no early exit), in constant time each.
    let matched = false
    for (const row of stored) matched = digestsEqual(String(row.digest), presented) || matched
    const wellFormed = Redacted.value(credential).startsWith(CredentialPrefix)
    if (!wellFormed || !matched || device.revoked_at_ms !== null) {
      return yield* new CredentialRejected({ code: "bad_credential" })
    }
    const runtimeType = String(device.runtime_type)
    if (runtimeType !== AgentDaemonRuntimeType) return yield* new CredentialRejected({ code: "wrong_runtime_type" })
    return { deviceId, workspaceId: String(device.workspace_id), runtimeType } satisfies DeviceRecord
  })

  /** The device an active credential belongs to (by digest), then the full check of `authenticate`. */
  const identify = Effect.fn("DeviceStore.identify")(function* (credential: Redacted.Redacted<string>) {
    const rows = yield* sql`SELECT device_id FROM device_credentials
      WHERE digest = ${digestCredential(credential)} AND revoked_at_ms IS NULL`.pipe(storeFailed("authenticate"))
    const owner = rows[0]
    if (owner === undefined) return yield* new CredentialRejected({ code: "bad_credential" })
    return yield* authenticate(String(owner.device_id), credential)
  })

  /** The statements of one declaration record (the caller owns the transaction). */
  /** The statements that store a declaration whole (its row and its kind rows); written in one transaction. */
  const writeRecord = (deviceId: string, connectionNumber: number, declaration: Declaration) => {
    const rows = [...declaration.kinds.values()].map((descriptor) => ({
      device_id: deviceId,
      kind: descriptor.kind,
      available: descriptor.available,
      version: descriptor.version ?? null,
      ...Capabilities.toPersistedProjection(descriptor.capabilities)
    }))
    return [
      sql`INSERT INTO device_declarations
          (device_id, connection_number, daemon_version, active_requests, heartbeat_ts, received_at_ms)
        VALUES (${deviceId}, ${connectionNumber}, ${declaration.daemonVersion ?? null}, ${declaration.activeRequests},
          ${declaration.ts}, ${declaration.receivedAtMs})
        ON CONFLICT (device_id) DO UPDATE SET
          connection_number = excluded.connection_number,
          daemon_version = excluded.daemon_version,
          active_requests = excluded.active_requests,
          heartbeat_ts = excluded.heartbeat_ts,
          received_at_ms = excluded.received_at_ms`,
      sql`DELETE FROM device_kinds WHERE device_id = ${deviceId}`,
      ...(Arr.isArrayNonEmpty(rows) ? [sql`INSERT INTO device_kinds ${sql.insert(rows)}`] : [])
    ]
  }

  const writeClear = (deviceId: string) => [
    sql`DELETE FROM device_kinds WHERE device_id = ${deviceId}`,
    sql`DELETE FROM device_declarations WHERE device_id = ${deviceId}`
  ]

  const recordDeclaration = Effect.fn("DeviceStore.recordDeclaration")(function* (
    deviceId: string,
    connectionNumber: number,
    declaration: Declaration
  ) {
    yield* batch.transaction(writeRecord(deviceId, connectionNumber, declaration)).pipe(storeFailed("record_declaration"))
  })

  const clearDeclaration = Effect.fn("DeviceStore.clearDeclaration")(function* (deviceId: string) {
    yield* batch.transaction(writeClear(deviceId)).pipe(storeFailed("clear_declaration"))
  })

  /** Every change in one transaction: with the worker store, one message for the whole batch (`SqlBatch`). */
  const persistDeclarations = Effect.fn("DeviceStore.persistDeclarations")(function* (
    changes: ReadonlyArray<DeclarationChange>
  ) {
    if (changes.length === 0) return
    yield* batch.transaction(changes.flatMap((change) => {
      switch (change._tag) {
        case "Record":
          return writeRecord(change.deviceId, change.connectionNumber, change.declaration)
        case "Liveness":
          return [sql`UPDATE device_declarations SET active_requests = ${change.activeRequests},
              heartbeat_ts = ${change.heartbeatTs}, received_at_ms = ${change.receivedAtMs}
            WHERE device_id = ${change.deviceId}`]
        case "Clear":
          return writeClear(change.deviceId)
      }
    })).pipe(storeFailed("record_declaration"))
  })

  /** Stored devices from their `devices` rows: declarations, kinds and active credentials of those devices only. */
  const assemble = (devices: ReadonlyArray<Record<string, unknown>>, all: boolean) =>
    Effect.gen(function* () {
      if (devices.length === 0) return []
      const ids = devices.map((row) => String(row.device_id))
      const only = all ? sql`1 = 1` : sql.in("device_id", ids)
      const declarations = yield* sql`SELECT * FROM device_declarations WHERE ${only}`
      const kinds = yield* sql`SELECT * FROM device_kinds WHERE ${only} ORDER BY device_id, kind`
      const active = yield* sql`SELECT device_id FROM device_credentials WHERE ${only} AND revoked_at_ms IS NULL`
      const activeSet = new Set(active.map((r) => String(r.device_id)))
      const declarationOf = new Map(declarations.map((d) => [String(d.device_id), d]))
      const kindsOf = new Map<string, Array<StoredKind>>()
      for (const k of kinds) {
        const id = String(k.device_id)
        const list = kindsOf.get(id)
        if (list === undefined) kindsOf.set(id, [readKind(k)])
        else list.push(readKind(k))
      }
      return devices.map((row): StoredDevice => {
        const deviceId = String(row.device_id)
        const decl = declarationOf.get(deviceId)
        return {
          deviceId,
          workspaceId: String(row.workspace_id),
          runtimeType: String(row.runtime_type),
          createdAtMs: toInt(row.created_at_ms),
          revokedAtMs: toIntOrUndefined(row.revoked_at_ms),
          hasActiveCredential: activeSet.has(deviceId),
          declaration: decl === undefined ? Option.none() : Option.some({
            connectionNumber: toInt(decl.connection_number),
            daemonVersion: toStringOrUndefined(decl.daemon_version),
            activeRequests: toInt(decl.active_requests),
            heartbeatTs: toInt(decl.heartbeat_ts),
            receivedAtMs: toInt(decl.received_at_ms),
            kinds: kindsOf.get(deviceId) ?? []
          })
        }
      })
    }).pipe(storeFailed("list_devices"))

  const listPage = (after: Option.Option<DeviceKey>, limit: number) =>
    Effect.flatMap(
      Option.match(after, {
        onNone: () => sql`SELECT * FROM devices ORDER BY created_at_ms, device_id LIMIT ${limit}`,
        onSome: (k) =>
          sql`SELECT * FROM devices
            WHERE created_at_ms > ${k.createdAtMs} OR (created_at_ms = ${k.createdAtMs} AND device_id > ${k.deviceId})
            ORDER BY created_at_ms, device_id LIMIT ${limit}`
      }).pipe(storeFailed("list_devices")),
      (rows) => assemble(rows, false)
    )

  return DeviceStore.of({
    issueCredential,
    revoke,
    authenticate,
    identify,
    recordDeclaration,
    clearDeclaration,
    persistDeclarations,
    get: (deviceId) =>
      sql`SELECT * FROM devices WHERE device_id = ${deviceId}`.pipe(
        storeFailed("list_devices"),
        Effect.flatMap((rows) => assemble(rows, false)),
        Effect.map((rows) => Option.fromNullishOr(rows[0]))
      ),
    list: sql`SELECT * FROM devices ORDER BY created_at_ms, device_id`.pipe(
      storeFailed("list_devices"),
      Effect.flatMap((rows) => assemble(rows, true))
    ),
    listPage
  })
})

/** The `DeviceStore` over the ambient `SqlClient` (schema already migrated). */
export const layer = Layer.effect(DeviceStore, make)

/**
 * `DeviceCredentials` (the gateway's interface) over the store: digests only, constant-time comparison,
 * bound to one device id. A store failure is `CredentialStoreFailed` (HTTP 500), never a rejection.
 */
export const credentialsLayer = Layer.effect(
  DeviceCredentials,
  Effect.gen(function* () {
    const store = yield* DeviceStore
    const failed = (operation: string) => () => new CredentialStoreFailed({ operation })
    return DeviceCredentials.of({
      authenticate: (deviceId, credential) =>
        store.authenticate(deviceId, credential).pipe(Effect.catchTag("StoreFailed", (e) => Effect.fail(failed(e.operation)()))),
      identify: (credential) =>
        store.identify(credential).pipe(Effect.catchTag("StoreFailed", (e) => Effect.fail(failed(e.operation)()))),
      issue: (deviceId) => store.issueCredential(deviceId).pipe(Effect.mapError(failed("issue_credential"))),
      revoke: (deviceId) => store.revoke(deviceId).pipe(Effect.asVoid, Effect.mapError(failed("revoke_credential")))
    })
  })
)
