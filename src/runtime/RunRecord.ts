/**
 * What a Run is, shared by the Run table (`Runs.ts`), its lifecycle events (`RunLifecycle.ts`) and the families
 * that follow a Run (Steering, Interactions, Functions, Cancellation). A `RunRecord` holds only the Run's own
 * state: its phase, Turn, settlement, output numbering and cancellation receipts. Each family keeps its own
 * per-Run state (input receipts, pending interactions, pending function calls) keyed by the record, and drops it
 * when the Run stops.
 */
import { Data, type Deferred, type Effect } from "effect"
import type { PromptRequestPayload } from "../proto/Execution.js"
import type { DeltaEncoder } from "../proto/EncodedFrame.js"
import type { RunId } from "../proto/Ids.js"
import type { MessageInput } from "../proto/MessageInput.js"
import type { ExecutorEntry } from "./Executors.js"
import type { HarnessDeclaration, Settlement, SettlementUnconfirmed, Turn } from "./harness/Harness.js"

export type RunPhase = "starting" | "running" | "settling" | "finished"

/** The Run never got a Turn (its start failed or it was stopped before start). */
export class NoTurn extends Data.TaggedError("NoTurn")<{}> {}

/** One Run. Mutable fields change only in synchronous sections of this connection's fibers. */
export interface RunRecord {
  readonly runId: RunId
  readonly kind: string
  /** Started from an admission handle (execution_start) rather than a direct prompt_request. */
  readonly prepared: boolean
  /** For a prepared Run: the request id of the admission that started it (Core's Turn correlation). */
  readonly requestId: string | undefined
  /** The starting request's trace when it is a valid traceparent (`Trace.echo`), carried by every Run frame. */
  readonly trace: string | undefined
  /** The configuration whose opt-ins this Run follows. */
  readonly config: PromptRequestPayload
  /** The declaration snapshot this Run's Executor and Turn were admitted with. */
  readonly snapshot: HarnessDeclaration
  executor: ExecutorEntry | undefined
  phase: RunPhase
  turn: Turn | undefined
  readonly turnReady: Deferred.Deferred<Turn, NoTurn>
  readonly nativeSettled: Deferred.Deferred<Settlement, SettlementUnconfirmed | NoTurn>
  /** Completes once the Run's stream is closed (done sent, or no done when settlement is unconfirmed). */
  readonly finished: Deferred.Deferred<void>
  cancelRequested: boolean
  /** Cancellation receipts waiting for settlement (with a delivery id). */
  receiptWaiters: number
  /** Claimed at settlement: the receipts carry the continuity snapshot, done carries no content. */
  receiptsOwnOutcome: boolean
  deltaSequence: number
  thinkingSequence: number
  /** Encodes the Run's `delta` frames directly (`EncodedFrame.deltaEncoder`); undefined: through the codec. */
  readonly encodeDelta: DeltaEncoder | undefined
}

/** Why a Run could not start. Nothing was submitted natively. */
export interface StartRefusal {
  readonly reason: string
  /** For a prepared start: the admission's rejection code. */
  readonly code: "executor_unavailable" | "executor_cleanup_unconfirmed" | "start_cancelled"
}

export interface RunSpec {
  readonly runId: RunId
  readonly kind: string
  readonly prepared: boolean
  readonly requestId?: string | undefined
  readonly trace: string | undefined
  readonly config: PromptRequestPayload
  readonly snapshot: HarnessDeclaration
  readonly input: MessageInput
  /** Provides the prepared Executor (already reserved) or prepares one; fails when nothing can run. */
  readonly acquire: Effect.Effect<ExecutorEntry, StartRefusal>
  /** A Turn exists (prepared: publish `started`). */
  readonly onStarted: Effect.Effect<void>
  /** No Turn will exist (prepared: publish the rejection). A direct Run reports error then done itself. */
  readonly onStartFailed: (refusal: StartRefusal) => Effect.Effect<void>
}
