/** A Turn's `execution_start` whose input is `items` (each a list of `input_text` parts), for start-frame codec tests. */
import { unsafeMake } from "../../src/proto/Ids.js"
import type { Messages } from "../../src/proto/index.js"

export const executionStart = (
  items: ReadonlyArray<ReadonlyArray<string>>,
  extra: Record<string, unknown> = {}
): Messages.CoreToRuntime => ({
  type: "execution_start",
  id: unsafeMake.preparationRequestId("prep-1"),
  payload: {
    executor_id: unsafeMake.executorId("ex-1"),
    handle: unsafeMake.admissionHandle("h-1"),
    run_id: unsafeMake.runId("run-1"),
    input: items.map((parts) => ({ content: parts.map((text) => ({ type: "input_text" as const, text })) }))
  },
  ...extra
}) as Messages.CoreToRuntime
