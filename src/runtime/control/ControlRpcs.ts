/**
 * The daemon's local control API (effect/rpc). It is served only on a Unix socket in the profile directory and
 * never carries protocol frames: `agentwire status` reads the StatusBoard snapshot through it, and
 * `agentwire status --metrics` the process's metrics. Reading changes nothing.
 */
import { Schema } from "effect"
import { Rpc, RpcGroup } from "effect/rpc"
import { StatusSnapshot } from "../StatusBoard.js"

export class ControlRpcs extends RpcGroup.make(
  /** The daemon's current status: connection, declared kinds, admissions, Executors, Runs, unconfirmed cleanups. */
  Rpc.make("Status", { success: StatusSnapshot }),
  /** Every metric of the daemon process in the Prometheus text format (`agentwire status --metrics`). */
  Rpc.make("Metrics", { success: Schema.String })
) {}
