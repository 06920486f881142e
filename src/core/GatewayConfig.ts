/**
 * Local settings of Core's gateway (protocol "Ownership and connection"; reference §1.3 and §1.7). The wire
 * facts (4 MiB frames, 60 s liveness, 64-envelope send queue, 10 s write deadline) come from `proto/Limits.ts`
 * and are the defaults here; tests override them with `GatewayConfig.layer({...})`, never by mutating a module
 * variable.
 *
 * The public base URL is the only source of the `ws_url` that bootstrap returns: it is never derived from
 * request headers (Host, X-Forwarded-*), so a client cannot steer a daemon to another origin.
 */
import { Context, Duration, Effect, Layer, Result, Schema } from "effect"
import { Limits } from "../proto/index.js"

/** The path of the WebSocket route, relative to the public base URL. */
export const WebSocketPath = "/api/v1/agent-daemon/ws"
/** The path of the bootstrap route. */
export const BootstrapPath = "/api/v1/agent-daemon/bootstrap"
/** The path of the device-status route. */
export const DeviceStatusPath = "/api/v1/agent-daemon/device-status"

export interface GatewayConfigShape {
  /**
   * Core's public base URL (`http(s)://host[:port][/prefix]`, no credentials, query or fragment). `ws_url` is
   * this URL with the scheme mapped to ws/wss and `/api/v1/agent-daemon/ws` appended.
   */
  readonly publicUrl: string
  /** The `ws_url` bootstrap returns, derived once from `publicUrl`. */
  readonly wsUrl: string
  /** Heartbeat cadence bootstrap returns (seconds, > 0). Default 15. */
  readonly heartbeatSeconds: number
  /** A connection with no inbound frame for this long is closed. Default 60 s. */
  readonly livenessTimeout: Duration.Duration
  /** Envelopes the per-connection send queue holds. Default 64. */
  readonly sendQueueCapacity: number
  /** Deadline of each socket write. Default 10 s; a write that fails or misses it closes the connection. */
  readonly writeDeadline: Duration.Duration
  /**
   * Events a Run subscriber buffers. Default 1024. When it is full the connection stops reading (backpressure)
   * until the consumer takes one.
   */
  readonly runSubscriptionBuffer: number
  /**
   * How long the read loop waits for room in a full Run subscriber before its consumer counts as gone (it
   * fails with `SubscriberOverflow`). Default 60 s. The connection reads nothing meanwhile.
   */
  readonly subscriberStallTimeout: Duration.Duration
  /** Run subscriptions per connection. Default 1024; more are rejected with `SubscriptionRejected{capacity}`. */
  readonly maxRunSubscriptions: number
  /** Replies a Correlator waiter buffers. Default 16. */
  readonly replyBuffer: number
  /** Pending Correlator waiters per connection. Default 1024. */
  readonly maxReplyWaiters: number
  /** Interaction id → Run routes remembered per connection (oldest forgotten first). Default 1024. */
  readonly maxInteractionRoutes: number
  /** Frames buffered for the FrameTap before further ones are dropped (the tap never slows the read loop). */
  readonly tapBuffer: number
}

/** The public base URL is unusable. */
export class GatewayConfigInvalid extends Schema.TaggedError<GatewayConfigInvalid>()("GatewayConfigInvalid", {
  field: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `invalid gateway configuration (${this.field}: ${this.detail})`
  }
}

/** Builds `ws_url` from a public base URL, or says why the URL is unusable. */
export const wsUrlFrom = (publicUrl: string): Result.Result<string, GatewayConfigInvalid> => {
  let url: URL
  try {
    url = new URL(publicUrl)
  } catch {
    return Result.fail(new GatewayConfigInvalid({ field: "publicUrl", detail: "not an absolute URL" }))
  }
  const scheme = { "http:": "ws:", "https:": "wss:", "ws:": "ws:", "wss:": "wss:" }[url.protocol]
  if (scheme === undefined) {
    return Result.fail(new GatewayConfigInvalid({ field: "publicUrl", detail: "scheme must be http, https, ws or wss" }))
  }
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") {
    return Result.fail(new GatewayConfigInvalid({ field: "publicUrl", detail: "no credentials, query or fragment allowed" }))
  }
  const prefix = url.pathname.replace(/\/+$/, "")
  return Result.succeed(`${scheme}//${url.host}${prefix}${WebSocketPath}`)
}

export type GatewayConfigOptions = Partial<Omit<GatewayConfigShape, "publicUrl" | "wsUrl">> & {
  readonly publicUrl: string
}

/** Validates options and fills the defaults. */
export const makeConfig = (options: GatewayConfigOptions): Result.Result<GatewayConfigShape, GatewayConfigInvalid> =>
  Result.flatMap(wsUrlFrom(options.publicUrl), (wsUrl) => {
    const heartbeatSeconds = options.heartbeatSeconds ?? Duration.toSeconds(Limits.DefaultHeartbeatInterval)
    if (!Number.isInteger(heartbeatSeconds) || heartbeatSeconds <= 0) {
      return Result.fail(new GatewayConfigInvalid({ field: "heartbeatSeconds", detail: "must be a positive integer" }))
    }
    const positive = (field: string, value: number) =>
      Number.isInteger(value) && value > 0
        ? undefined
        : new GatewayConfigInvalid({ field, detail: "must be a positive integer" })
    const config: GatewayConfigShape = {
      publicUrl: options.publicUrl,
      wsUrl,
      heartbeatSeconds,
      livenessTimeout: options.livenessTimeout ?? Limits.LivenessTimeout,
      sendQueueCapacity: options.sendQueueCapacity ?? Limits.CoreSendQueueCapacity,
      writeDeadline: options.writeDeadline ?? Limits.FrameWriteDeadline,
      runSubscriptionBuffer: options.runSubscriptionBuffer ?? 1024,
      subscriberStallTimeout: options.subscriberStallTimeout ?? Duration.seconds(60),
      maxRunSubscriptions: options.maxRunSubscriptions ?? 1024,
      replyBuffer: options.replyBuffer ?? 16,
      maxReplyWaiters: options.maxReplyWaiters ?? 1024,
      maxInteractionRoutes: options.maxInteractionRoutes ?? 1024,
      tapBuffer: options.tapBuffer ?? 4096
    }
    for (
      const field of [
        "sendQueueCapacity",
        "runSubscriptionBuffer",
        "maxRunSubscriptions",
        "replyBuffer",
        "maxReplyWaiters",
        "maxInteractionRoutes",
        "tapBuffer"
      ] as const
    ) {
      const issue = positive(field, config[field])
      if (issue !== undefined) return Result.fail(issue)
    }
    return Result.succeed(config)
  })

export class GatewayConfig extends Context.Service<GatewayConfig, GatewayConfigShape>()("agentwire/core/GatewayConfig") {
  /** A validated configuration; the layer fails with `GatewayConfigInvalid` for an unusable URL or value. */
  static readonly layer = (options: GatewayConfigOptions): Layer.Layer<GatewayConfig, GatewayConfigInvalid> =>
    Layer.effect(GatewayConfig, Effect.fromResult(makeConfig(options)))
}
