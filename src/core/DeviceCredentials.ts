/**
 * Daemon credentials: the only credentials the machine routes accept. Stored as SHA-256 digests, compared in
 * constant time, each bound to exactly one device id. A valid credential authenticates its device and nothing
 * else: it never chooses another device, Session or Environment binding. Project API keys and the Core key
 * are never Runtime credentials (they do not carry the daemon-credential prefix and are never stored here).
 *
 * The interface is implemented in memory here (tests, embedding) and over SQL by the dev Core's store.
 */
import { Context, Effect, Layer, Option, Redacted, Ref, Schema } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"

/** Prefix of every daemon credential this Core issues. */
export const CredentialPrefix = "awdc_"

/** The device kind a daemon credential may authenticate. */
export const AgentDaemonRuntimeType = "agent-daemon"

export interface DeviceRecord {
  readonly deviceId: string
  readonly workspaceId: string
  /** `agent-daemon` for Runtime devices; anything else is refused with 403 wrong_runtime_type. */
  readonly runtimeType: string
}

/** Authentication refused. `unknown_device` and `bad_credential` are 401; `wrong_runtime_type` is 403. */
export class CredentialRejected extends Schema.TaggedError<CredentialRejected>()("CredentialRejected", {
  code: Schema.Literals(["unknown_device", "bad_credential", "wrong_runtime_type"])
}) {
  override get message() {
    return `credential rejected (${this.code})`
  }
}

/** The credential store failed; nothing was decided (HTTP 500 internal). */
export class CredentialStoreFailed extends Schema.TaggedError<CredentialStoreFailed>()("CredentialStoreFailed", {
  operation: Schema.String
}) {
  override get message() {
    return `credential store failed (${this.operation})`
  }
}

/** SHA-256 digest (hex) of a presented credential. */
export const digestCredential = (credential: Redacted.Redacted<string>): string =>
  createHash("sha256").update(Redacted.value(credential), "utf8").digest("hex")

/** Constant-time comparison of two hex digests of equal length. */
export const digestsEqual = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "hex")
  const right = Buffer.from(b, "hex")
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right)
}

/** A new random daemon credential (32 random bytes, base64url, with the daemon prefix). */
export const generateCredential = (): Redacted.Redacted<string> =>
  Redacted.make(CredentialPrefix + randomBytes(32).toString("base64url"))

export class DeviceCredentials extends Context.Service<DeviceCredentials, {
  /**
   * Authenticates `credential` for `deviceId`. Succeeds with the device record only when a stored digest for
   * exactly that device matches; "no credential stored" and "wrong credential" both fail as bad_credential.
   */
  readonly authenticate: (
    deviceId: string,
    credential: Redacted.Redacted<string>
  ) => Effect.Effect<DeviceRecord, CredentialRejected | CredentialStoreFailed>
  /**
   * Finds the device an active credential belongs to, without knowing the device id (bootstrap checks the
   * whole credential this way before it reads a body). Fails with bad_credential when no active digest
   * matches (or the device is revoked) and wrong_runtime_type for a device of another kind. Lookup is by
   * the credential's SHA-256 digest: timing can reveal nothing but whether a digest exists.
   */
  readonly identify: (credential: Redacted.Redacted<string>) => Effect.Effect<DeviceRecord, CredentialRejected | CredentialStoreFailed>
  /** Creates (or replaces) the device's credential and returns it; only its digest is kept. */
  readonly issue: (deviceId: string) => Effect.Effect<Redacted.Redacted<string>, CredentialStoreFailed>
  /** Revokes the device's credential; later authentications fail with bad_credential. */
  readonly revoke: (deviceId: string) => Effect.Effect<void, CredentialStoreFailed>
}>()("agentwire/core/DeviceCredentials") {
  /** An in-memory store (tests and embedding). */
  static readonly layerMemory = (options?: {
    readonly devices?: ReadonlyArray<DeviceRecord & { readonly credential?: string }>
  }) =>
    Layer.effect(
      DeviceCredentials,
      Effect.gen(function* () {
        const devices = yield* Ref.make(
          new Map((options?.devices ?? []).map((d) => [d.deviceId, { workspaceId: d.workspaceId, runtimeType: d.runtimeType }]))
        )
        const digests = yield* Ref.make(
          new Map(
            (options?.devices ?? []).flatMap((d) =>
              d.credential === undefined ? [] : [[d.deviceId, digestCredential(Redacted.make(d.credential))] as const]
            )
          )
        )
        const authenticate = (deviceId: string, credential: Redacted.Redacted<string>) =>
            Effect.gen(function* () {
              const device = (yield* Ref.get(devices)).get(deviceId)
              if (device === undefined) return yield* new CredentialRejected({ code: "unknown_device" })
              const stored = Option.fromNullishOr((yield* Ref.get(digests)).get(deviceId))
              const presented = Redacted.value(credential)
              const ok = presented.startsWith(CredentialPrefix) && Option.isSome(stored) &&
                digestsEqual(stored.value, digestCredential(credential))
              if (!ok) return yield* new CredentialRejected({ code: "bad_credential" })
              if (device.runtimeType !== AgentDaemonRuntimeType) {
                return yield* new CredentialRejected({ code: "wrong_runtime_type" })
              }
              return { deviceId, ...device }
            })
        return DeviceCredentials.of({
          authenticate,
          identify: (credential) =>
            Effect.gen(function* () {
              const presented = digestCredential(credential)
              let owner: string | undefined
              for (const [deviceId, digest] of yield* Ref.get(digests)) if (digestsEqual(digest, presented)) owner = deviceId
              if (owner === undefined) return yield* new CredentialRejected({ code: "bad_credential" })
              return yield* authenticate(owner, credential)
            }),
          issue: (deviceId) =>
            Effect.gen(function* () {
              const credential = generateCredential()
              yield* Ref.update(devices, (m) =>
                m.has(deviceId) ? m : new Map(m).set(deviceId, { workspaceId: "default", runtimeType: AgentDaemonRuntimeType }))
              yield* Ref.update(digests, (m) => new Map(m).set(deviceId, digestCredential(credential)))
              return credential
            }),
          revoke: (deviceId) => Ref.update(digests, (m) => {
            const next = new Map(m)
            next.delete(deviceId)
            return next
          })
        })
      })
    )
}
