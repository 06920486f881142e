/**
 * A scripted Core: the machine routes a Runtime connects to (`POST /api/v1/agent-daemon/bootstrap` and the
 * `/api/v1/agent-daemon/ws` upgrade) on a loopback HTTP server, plus the replay endpoint that hands the
 * accepted connections to the scenario engine. Used by the Runtime-side runner against the real daemon and
 * by `agentwire conformance runtime` against any Runtime.
 *
 * Route rules follow the reference gateway (reference part 1 §1.3, §1.5, §1.6): bootstrap checks the method,
 * the Bearer header, the JSON body and the credential; the upgrade answers 400 `missing_params`, then 426
 * `incompatible_version` (checked before the credential), then 401 for a credential it does not accept.
 * Errors use the `{error, detail}` body. The scripted Core also records what a Runtime must never do: put a
 * credential in a URL or dial a different path.
 *
 * It never logs a credential or a payload, and its error details never echo more than a bounded version string.
 */
import { Duration, Effect, Option, Redacted, Schema, type Scope } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { WebSocketServer } from "ws"
import type { ConnectStep } from "../../scenarios/WireScenario.js"
import { MaxFrameBytes } from "../proto/Limits.js"
import { ProtocolVersion } from "../proto/Version.js"
import { type Mailbox, makeMailbox } from "./internal/mailbox.js"
import { type Link, makeLink } from "./internal/wsLink.js"
import type { Endpoint, Hooks, StepFailure } from "./Replay.js"

export const BootstrapPath = "/api/v1/agent-daemon/bootstrap"
export const WebSocketPath = "/api/v1/agent-daemon/ws"

/** The listener could not be bound. */
export class ListenFailed extends Schema.TaggedError<ListenFailed>()("ListenFailed", {
  host: Schema.String,
  port: Schema.Int,
  reason: Schema.String
}) {
  override get message() {
    return `cannot listen on ${this.host}:${this.port} (${this.reason})`
  }
}

export interface ScriptedCoreOptions {
  /** Default 127.0.0.1. */
  readonly host?: string
  /** Default 0 (any free port). */
  readonly port?: number
  readonly deviceId: string
  readonly credential: Redacted.Redacted<string>
  readonly workspaceId?: string
}

/** Per-scenario behaviour of the routes. */
export interface RouteConfig {
  /** The wire version this Core speaks (default: ours). */
  readonly version: string
  /** The cadence bootstrap returns (default 15). */
  readonly heartbeatSeconds: number
  /** Refuse every credential with 401 bad_credential (the credential was revoked). */
  readonly rejectCredentials: boolean
}

/** One connection attempt as the routes saw it. */
export type Attempt =
  | { readonly _tag: "Bootstrap"; readonly status: number; readonly error?: string }
  | { readonly _tag: "Upgrade"; readonly status: number; readonly error?: string; readonly link?: Link }

export interface ScriptedCore {
  /** The Core URL a Runtime is configured with (machine API base, ending in /api/v1). */
  readonly coreUrl: string
  readonly port: number
  /** The replay endpoint (role core). */
  readonly endpoint: Endpoint
  /** Sets the route behaviour for the next connection attempts. */
  readonly configure: (config: Partial<RouteConfig>) => Effect.Effect<void>
  /** Applies a scenario's Connect step to the routes (call before starting the Runtime under test). */
  readonly prepareFor: (step: ConnectStep) => Effect.Effect<void>
  /** Every attempt so far, oldest first (for tests). */
  readonly attempts: Effect.Effect<ReadonlyArray<Attempt>>
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()

const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

const refuseUpgrade = (socket: Duplex, status: number, error: string, detail: string) => {
  const body = JSON.stringify({ error, detail })
  const reason = status === 426 ? "Upgrade Required" : status === 401 ? "Unauthorized" : status === 404 ? "Not Found" : "Bad Request"
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`
  )
}

const bearerOf = (req: IncomingMessage): string | undefined => {
  const header = req.headers["authorization"]
  if (typeof header !== "string" || !header.startsWith("Bearer ")) return undefined
  const token = header.slice("Bearer ".length).trim()
  return token === "" ? undefined : token
}

/**
 * Starts a scripted Core on a loopback port. The listener and every connection close with the scope.
 */
export const make = (options: ScriptedCoreOptions): Effect.Effect<ScriptedCore, ListenFailed, Scope.Scope> =>
  Effect.gen(function* () {
    const host = options.host ?? "127.0.0.1"
    const expectedDigest = digest(Redacted.value(options.credential))
    let config: RouteConfig = { version: ProtocolVersion, heartbeatSeconds: 15, rejectCredentials: false }
    const attempts: Mailbox<Attempt> = makeMailbox()
    const history: Array<Attempt> = []
    const violations: Array<string> = []
    const sockets = new Set<{ terminate: () => void }>()
    let linkNumber = 0
    let port = 0
    const record = (a: Attempt) => {
      history.push(a)
      attempts.push(a)
    }
    const credentialOk = (presented: string) => !config.rejectCredentials && timingSafeEqual(digest(presented), expectedDigest)
    const checkUrl = (url: URL) => {
      const secret = Redacted.value(options.credential)
      for (const [key, value] of url.searchParams) {
        if (key === "token" || value === secret) violations.push("the Runtime put a credential in the URL")
      }
    }

    const wss = new WebSocketServer({ noServer: true, maxPayload: MaxFrameBytes })

    const onBootstrap = (req: IncomingMessage, res: ServerResponse) => {
      const fail = (status: number, error: string, detail = "") => {
        record({ _tag: "Bootstrap", status, error })
        sendJson(res, status, { error, detail })
      }
      if (req.method !== "POST") return fail(405, "method_not_allowed")
      checkUrl(new URL(req.url ?? "/", "http://core.invalid"))
      const bearer = bearerOf(req)
      const chunks: Array<Buffer> = []
      let size = 0
      req.on("data", (chunk: Buffer) => {
        size += chunk.byteLength
        if (size <= 64 * 1024) chunks.push(chunk)
      })
      req.on("end", () => {
        if (bearer === undefined) return fail(401, "missing_bearer")
        let body: unknown
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          return fail(400, "bad_json")
        }
        const deviceId = typeof body === "object" && body !== null ? (body as Record<string, unknown>)["device_id"] : undefined
        if (typeof deviceId !== "string" || deviceId === "") return fail(400, "missing_device_id")
        if (deviceId !== options.deviceId) return fail(401, "unknown_device")
        if (!credentialOk(bearer)) return fail(401, "bad_credential")
        record({ _tag: "Bootstrap", status: 200 })
        sendJson(res, 200, {
          device_id: options.deviceId,
          workspace_id: options.workspaceId ?? "3d1e8b60-0b9e-4a8f-8a8e-2f0f9d7c5a10",
          ws_url: `ws://${host}:${port}${WebSocketPath}`,
          heartbeat_seconds: config.heartbeatSeconds,
          protocol_version: config.version
        })
      })
    }

    const server = createServer((req, res) => {
      const path = new URL(req.url ?? "/", "http://core.invalid").pathname
      if (path === BootstrapPath) return onBootstrap(req, res)
      sendJson(res, 404, { error: "not_found", detail: "" })
    })
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url ?? "/", "http://core.invalid")
      const refuse = (status: number, error: string, detail = "") => {
        record({ _tag: "Upgrade", status, error })
        refuseUpgrade(socket, status, error, detail)
      }
      if (url.pathname !== WebSocketPath) {
        violations.push("the Runtime dialled another path than the bootstrap ws_url")
        return refuse(404, "not_found")
      }
      checkUrl(url)
      const deviceId = url.searchParams.get("device_id")
      const version = url.searchParams.get("version")
      const bearer = bearerOf(req)
      if (deviceId === null || deviceId === "" || version === null || version === "" || bearer === undefined) {
        return refuse(400, "missing_params")
      }
      if (version !== config.version) {
        return refuse(426, "incompatible_version", `daemon protocol ${version.slice(0, 32)} incompatible with server ${config.version}`)
      }
      if (deviceId !== options.deviceId) return refuse(401, "unknown_device")
      if (!credentialOk(bearer)) return refuse(401, "bad_credential")
      wss.handleUpgrade(req, socket, head, (ws) => {
        sockets.add(ws)
        ws.on("close", () => sockets.delete(ws))
        record({ _tag: "Upgrade", status: 101, link: makeLink(ws, ++linkNumber) })
      })
    })

    yield* Effect.acquireRelease(
      Effect.callback<void, ListenFailed>((resume) => {
        server.once("error", (e) => resume(Effect.fail(new ListenFailed({ host, port: options.port ?? 0, reason: e.message }))))
        server.listen(options.port ?? 0, host, () => {
          const address = server.address()
          port = typeof address === "object" && address !== null ? address.port : 0
          resume(Effect.void)
        })
      }),
      () =>
        Effect.callback<void>((resume) => {
          for (const s of sockets) s.terminate()
          wss.close()
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )

    /** Waits for the next attempt that ended (an upgrade, or a refused bootstrap). */
    const nextOutcome = (hooks: Hooks, nudge: boolean): Effect.Effect<Attempt, StepFailure> => {
      const loop: Effect.Effect<Attempt> = Effect.flatMap(attempts.take, (a) =>
        a._tag === "Bootstrap" && a.status === 200 ? loop : Effect.succeed(a))
      // Only the deadline runs on the live clock: the nudge moves the implementation's (test) clock.
      const bounded = hooks.live(
        loop.pipe(
          Effect.timeoutOrElse({
            duration: hooks.connectTimeout ?? Duration.times(hooks.frameTimeout, 4),
            orElse: () => Effect.fail<StepFailure>({ reason: "the Runtime did not connect" })
          })
        )
      )
      return nudge && hooks.nudge !== undefined ? Effect.raceFirst(bounded, Effect.forever(hooks.nudge)) : bounded
    }

    const takeViolations = (): Option.Option<string> => {
      const v = violations.splice(0)
      return v.length === 0 ? Option.none() : Option.some([...new Set(v)].join("; "))
    }

    const upgraded = (a: Attempt): Effect.Effect<Link, StepFailure> =>
      a._tag === "Upgrade" && a.link !== undefined
        ? Effect.succeed(a.link)
        : Effect.fail({ reason: "the connection was refused", expected: "an upgraded connection", actual: describe(a) })

    const configure = (next: Partial<RouteConfig>) => Effect.sync(() => {
      config = { ...config, ...next }
    })
    const prepareFor = (step: ConnectStep) =>
      configure({ version: step.peerVersion ?? ProtocolVersion, rejectCredentials: step.credential === "wrong" })

    const endpoint: Endpoint = {
      role: "core",
      connect: (step, hooks) =>
        Effect.gen(function* () {
          yield* prepareFor(step)
          const outcome = yield* nextOutcome(hooks, false)
          const violation = takeViolations()
          if (Option.isSome(violation)) return yield* Effect.fail<StepFailure>({ reason: violation.value })
          const expect = step.expect
          if (expect._tag === "Upgraded") return Option.some(yield* upgraded(outcome))
          const stage = outcome._tag === "Bootstrap" ? "bootstrap" : "upgrade"
          if (stage !== expect.at || outcome.status !== expect.status || outcome.error !== expect.error) {
            if (outcome._tag === "Upgrade" && outcome.link !== undefined) yield* outcome.link.drop
            return yield* Effect.fail<StepFailure>({
              reason: "the connection attempt ended differently",
              expected: `${expect.at} refused with ${expect.status} ${expect.error}`,
              actual: describe(outcome)
            })
          }
          return Option.none()
        }),
      reconnect: (hooks) =>
        Effect.gen(function* () {
          yield* configure({ version: ProtocolVersion, rejectCredentials: false })
          const outcome = yield* nextOutcome(hooks, true)
          const violation = takeViolations()
          if (Option.isSome(violation)) return yield* Effect.fail<StepFailure>({ reason: violation.value })
          return yield* upgraded(outcome)
        }),
      replace: (current, hooks) =>
        Effect.gen(function* () {
          yield* current.close(4000, "replaced")
          const outcome = yield* nextOutcome(hooks, true)
          return yield* upgraded(outcome)
        }),
      unexpectedActivity: Effect.gen(function* () {
        const violation = takeViolations()
        if (Option.isSome(violation)) return violation
        const next = yield* attempts.poll
        if (Option.isNone(next)) return Option.none()
        if (next.value._tag === "Upgrade" && next.value.link !== undefined) yield* next.value.link.drop
        return Option.some(`the Runtime made a new connection attempt (${describe(next.value)})`)
      })
    }

    return {
      get coreUrl() {
        return `http://${host}:${port}/api/v1`
      },
      get port() {
        return port
      },
      endpoint,
      configure,
      prepareFor,
      attempts: Effect.sync(() => history.slice())
    } satisfies ScriptedCore
  })

const describe = (a: Attempt): string =>
  a._tag === "Bootstrap"
    ? `bootstrap answered ${a.status}${a.error === undefined ? "" : ` ${a.error}`}`
    : a.status === 101
    ? "upgraded"
    : `upgrade answered ${a.status}${a.error === undefined ? "" : ` ${a.error}`}`
