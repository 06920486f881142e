/**
 * A scripted Runtime: dials a Core the way a daemon does (`POST /api/v1/agent-daemon/bootstrap` with the
 * Bearer credential and the device id, then the WebSocket at the returned `ws_url` with `device_id` and
 * `version` query parameters and the Bearer header) and hands the connection to the scenario engine, which
 * replays the Runtime's frames and checks the frames Core sends. Used by the Core-side runner against the
 * real gateway and by `agentwire conformance core` against any Core.
 *
 * The credential stays `Redacted` until the two lines that build an `Authorization` header; it never goes into
 * a URL (a `token` query parameter in `ws_url` is removed, like the reference daemon does), a log or a report.
 */
import { Effect, Option, Redacted } from "effect"
import type { ConnectStep } from "../../scenarios/WireScenario.js"
import { ProtocolVersion } from "../proto/Version.js"
import { dial, type Link } from "./internal/wsLink.js"
import type { Endpoint, Hooks, StepFailure } from "./Replay.js"

export interface ScriptedRuntimeOptions {
  /** The machine API base, e.g. `http://127.0.0.1:8080/api/v1` (an origin without the path is accepted too). */
  readonly coreUrl: string
  readonly deviceId: string
  readonly credential: Redacted.Redacted<string>
}

export interface ScriptedRuntime {
  readonly endpoint: Endpoint
}

/** The bootstrap answer the scripted Runtime needs (other members are ignored). */
interface BootstrapAnswer {
  readonly wsUrl: string
  readonly heartbeatSeconds: number
}

type BootstrapOutcome =
  | { readonly _tag: "Ok"; readonly answer: BootstrapAnswer }
  | { readonly _tag: "Refused"; readonly status: number; readonly error: string | undefined }

const apiBase = (coreUrl: string): string => {
  const trimmed = coreUrl.replace(/\/+$/, "")
  return trimmed.endsWith("/api/v1") ? trimmed : `${trimmed}/api/v1`
}

export const make = (options: ScriptedRuntimeOptions): ScriptedRuntime => {
  let linkNumber = 0

  const bootstrap = (credential: Redacted.Redacted<string>, hooks: Hooks): Effect.Effect<BootstrapOutcome, StepFailure> =>
    hooks.live(
      Effect.tryPromise({
        try: async (signal) => {
          const res = await fetch(`${apiBase(options.coreUrl)}/agent-daemon/bootstrap`, {
            method: "POST",
            headers: { authorization: `Bearer ${Redacted.value(credential)}`, "content-type": "application/json" },
            body: JSON.stringify({ device_id: options.deviceId }),
            signal
          })
          const text = (await res.text()).slice(0, 64 * 1024)
          let body: Record<string, unknown> = {}
          try {
            const parsed: unknown = JSON.parse(text)
            if (typeof parsed === "object" && parsed !== null) body = parsed as Record<string, unknown>
          } catch {
            // a non-JSON answer is judged by its status below
          }
          if (res.status !== 200) {
            return { _tag: "Refused", status: res.status, error: typeof body["error"] === "string" ? body["error"].slice(0, 64) : undefined } as const
          }
          const wsUrl = body["ws_url"]
          const heartbeat = body["heartbeat_seconds"]
          if (typeof wsUrl !== "string" || !/^wss?:\/\//.test(wsUrl) || body["device_id"] !== options.deviceId) {
            throw new Error("bootstrap answered 200 without a ws_url and this device_id")
          }
          return {
            _tag: "Ok",
            answer: { wsUrl, heartbeatSeconds: typeof heartbeat === "number" && heartbeat > 0 ? heartbeat : 15 }
          } as const
        },
        catch: (e) => ({ reason: e instanceof Error && e.message.startsWith("bootstrap") ? e.message : "bootstrap request failed" })
      }).pipe(
        Effect.timeoutOrElse({
          duration: hooks.frameTimeout,
          orElse: () => Effect.fail<StepFailure>({ reason: "bootstrap did not answer" })
        })
      )
    )

  const upgrade = (answer: BootstrapAnswer, version: string, credential: Redacted.Redacted<string>, hooks: Hooks) => {
    const url = new URL(answer.wsUrl)
    url.searchParams.delete("token")
    url.searchParams.set("device_id", options.deviceId)
    url.searchParams.set("version", version)
    return hooks.live(
      dial(url.toString(), { authorization: `Bearer ${Redacted.value(credential)}` }, ++linkNumber).pipe(
        Effect.timeoutOrElse({
          duration: hooks.frameTimeout,
          orElse: () => Effect.fail({ _tag: "Timeout" as const })
        }),
        Effect.result
      )
    )
  }

  const connect = (step: ConnectStep, hooks: Hooks): Effect.Effect<Option.Option<Link>, StepFailure> =>
    Effect.gen(function* () {
      const credential = step.credential === "wrong"
        ? Redacted.make(`${Redacted.value(options.credential)}-revoked`)
        : options.credential
      const expect = step.expect
      const boot = yield* bootstrap(credential, hooks)
      if (boot._tag === "Refused") {
        if (expect._tag === "Refused" && expect.at === "bootstrap" && expect.status === boot.status && expect.error === boot.error) {
          return Option.none()
        }
        return yield* Effect.fail<StepFailure>({
          reason: "bootstrap was refused",
          expected: expect._tag === "Upgraded" ? "200" : `${expect.at} refused with ${expect.status} ${expect.error}`,
          actual: `${boot.status} ${boot.error ?? ""}`.trim()
        })
      }
      if (expect._tag === "Refused" && expect.at === "bootstrap") {
        return yield* Effect.fail<StepFailure>({
          reason: "bootstrap was accepted",
          expected: `refused with ${expect.status} ${expect.error}`,
          actual: "200"
        })
      }
      const dialled = yield* upgrade(boot.answer, step.peerVersion ?? ProtocolVersion, credential, hooks)
      if (dialled._tag === "Success") {
        if (expect._tag === "Upgraded") return Option.some(dialled.success)
        yield* dialled.success.drop
        return yield* Effect.fail<StepFailure>({
          reason: "the upgrade was accepted",
          expected: `refused with ${expect.status} ${expect.error}`,
          actual: "101"
        })
      }
      const e = dialled.failure
      if (e._tag === "DialRefused" && expect._tag === "Refused" && expect.at === "upgrade" && e.status === expect.status && e.error === expect.error) {
        return Option.none()
      }
      return yield* Effect.fail<StepFailure>({
        reason: e._tag === "Timeout" ? "the upgrade did not complete" : e.message,
        expected: expect._tag === "Upgraded" ? "101" : `refused with ${expect.status} ${expect.error}`,
        ...(e._tag === "DialRefused" ? { actual: `${e.status} ${e.error ?? ""}`.trim() } : {})
      })
    })

  const upgradedOnly = (hooks: Hooks) =>
    connect({ _tag: "Connect", expect: { _tag: "Upgraded" } }, hooks).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail<StepFailure>({ reason: "no connection" }),
        onSome: Effect.succeed
      }))
    )

  const endpoint: Endpoint = {
    role: "runtime",
    connect,
    reconnect: upgradedOnly,
    replace: (current, hooks) =>
      Effect.gen(function* () {
        const next = yield* upgradedOnly(hooks)
        // Core must close the older connection; nothing else may arrive on it.
        const closed = yield* hooks.live(
          current.take.pipe(
            Effect.map(Option.some),
            Effect.timeoutOrElse({ duration: hooks.frameTimeout, orElse: () => Effect.succeedNone })
          )
        ).pipe(Effect.map(Option.getOrUndefined))
        if (closed === undefined) {
          yield* next.drop
          return yield* Effect.fail<StepFailure>({ reason: "Core did not close the older connection" })
        }
        if (closed._tag !== "Closed") {
          yield* next.drop
          return yield* Effect.fail<StepFailure>({ reason: "Core sent a frame on the older connection instead of closing it" })
        }
        return next
      }),
    unexpectedActivity: Effect.succeed(Option.none())
  }
  return { endpoint }
}
