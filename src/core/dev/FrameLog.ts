/**
 * The dev Core's debug line per frame (docs/operations.md "Logs"): `frame sent` (Core to Runtime) and `frame
 * received` (Runtime to Core) with the type, the envelope id, the encoded size, the device and the gateway's
 * connection number; for a frame that failed decoding, the reason. Never a payload. It is a `FrameTap`, so it
 * runs on the tap's own fiber (never on the read loop) and the `core` command installs it only when debug lines
 * are on: at any other level the gateway does no per-frame tap work at all.
 */
import { Effect } from "effect"
import { printable } from "../../proto/Ids.js"
import type { TappedFrame } from "../FrameTap.js"

/** Logs one tapped frame at debug. */
export const logFrame = (frame: TappedFrame): Effect.Effect<void> =>
  Effect.logDebug(frame.direction === "core→runtime" ? "frame sent" : "frame received").pipe(
    Effect.annotateLogs({
      type: frame.type,
      id: frame.id === undefined ? "" : printable(frame.id),
      bytes: frame.bytes,
      device_id: printable(frame.deviceId),
      connection: frame.connectionNumber,
      ...(frame.invalid === undefined ? {} : { invalid: frame.invalid })
    })
  )
