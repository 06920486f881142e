/**
 * Core side of the wire scenario suite: every scenario Core replays, against the real gateway over a loopback
 * WebSocket (test/support/wireCoreRunner.ts), then the side's suite three times for determinism
 * (test/support/wireSuite.ts). Imports the gateway, never the daemon.
 */
import { runCoreScenario } from "../support/wireCoreRunner.js"
import { wireSuite } from "../support/wireSuite.js"

wireSuite("core", "Core side (real gateway vs scripted Runtime)", runCoreScenario)
