/**
 * The Core gateway library (`import { Gateway, GatewayServer } from "agentwire/gateway"`): what a platform
 * embeds to accept Runtime daemons (docs/gateway.md "Public API", docs/operations.md "Embedding"). Imports
 * `effect` and `@effect/platform-node` as peer dependencies; the wire contract is `agentwire/proto`.
 */
export * as DeviceCredentials from "./DeviceCredentials.js"
export * as DeviceSession from "./DeviceSession.js"
export * as FrameTap from "./FrameTap.js"
export * as Gateway from "./Gateway.js"
export * as GatewayConfig from "./GatewayConfig.js"
export * as GatewayHttp from "./server/GatewayHttp.js"
export * as GatewayServer from "./server/GatewayServer.js"
export * as Subscriptions from "./Subscriptions.js"
