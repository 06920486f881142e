/**
 * Runtime side of the wire scenario suite: every scenario the Runtime replays, against the real daemon over a
 * loopback WebSocket (test/support/wireRuntimeRunner.ts), then the side's suite three times for determinism
 * (test/support/wireSuite.ts). Imports the daemon, never the gateway.
 */
import { runRuntimeScenario } from "../support/wireRuntimeRunner.js"
import { wireSuite } from "../support/wireSuite.js"

wireSuite("runtime", "Runtime side (real daemon vs scripted Core)", runRuntimeScenario)
