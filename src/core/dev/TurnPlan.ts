/**
 * What a Turn runner (`TurnRunner.ts`) is given and keeps: the Turns service's tunables, the plan of a recorded
 * Turn, and the live state of a Turn whose runner is alive (the operations read it).
 */
import type { Deferred, Duration, Fiber, Tracer } from "effect"
import type { Functions as FunctionsProto, Ids, MessageInput } from "../../proto/index.js"
import type * as Delivery from "../Delivery.js"
import type { DeviceSession } from "../DeviceSession.js"
import type { ExecutionSpec } from "../ExecutionRequest.js"
import type * as Functions from "../Functions.js"
import type * as Interactions from "../Interactions.js"
import type { Lease } from "./pg/OwnerLeases.js"
import type { JournalWriter } from "./TurnJournal.js"

/** Tunables (tests shorten them). */
export interface TurnsOptions {
  /** First wait before another attempt of an unclaimed Turn; doubles up to `maxRetryDelay`. Default 1 s. */
  readonly retryDelay?: Duration.Input
  readonly maxRetryDelay?: Duration.Input
  /** How long shutdown waits for running Turns to record their outcome. Default 20 s (a cancellation may hold 15 s). */
  readonly shutdownGrace?: Duration.Input
  /** First wait before a failed store write of a Turn is retried; doubles up to `maxStoreRetryDelay`. Default 100 ms. */
  readonly storeRetryDelay?: Duration.Input
  /** Default 5 s. */
  readonly maxStoreRetryDelay?: Duration.Input
  /**
   * How long one store write of a Turn may keep failing before the Turn's observation ends with
   * `journal_unavailable` (the write keeps being retried). Default 30 s.
   */
  readonly journalStallBudget?: Duration.Input
  /** Delivery tunables; `durableDispatch` is always on in the dev Core. */
  readonly delivery?: Delivery.DeliveryOptions
}

/** What a runner delivers (recorded before it is launched). */
export interface TurnPlan {
  readonly turnId: string
  readonly sessionId: string
  readonly runId: Ids.RunId
  readonly deviceId: string
  readonly spec: ExecutionSpec
  readonly input: MessageInput.MessageInput
  /** Created by a start here just now (nothing journaled): the first attempt's writer starts at seq 0 unread. */
  readonly fresh?: boolean
}

/** A Turn whose runner is alive. The operations read it; only its runner writes `current`. */
export interface Active extends TurnPlan {
  /** Set while an attempt is delivering. */
  current: {
    readonly session: DeviceSession
    readonly delivery: Delivery.Turn
    readonly writer: JournalWriter
    readonly functions: Functions.Functions | undefined
  } | undefined
  /** Pending permission requests and user-choice asks (from the Run's events). */
  pending: ReadonlyMap<string, Interactions.PendingInteraction>
  /** Function calls of the Run, by call id. */
  readonly calls: Map<string, FunctionsProto.FunctionCallPayload>
  /** Cancel requested while no attempt was delivering (queued, waiting for a device or a retry). */
  readonly cancelQueued: Deferred.Deferred<void>
  readonly finished: Deferred.Deferred<void>
  /** The runner's `Turn` span: steer and cancel requests run below it (TurnTelemetry.inTurn). */
  span?: Tracer.AnySpan | undefined
  /** Several nodes: the owner lease the current attempt's writes are fenced on (TurnFence.ts). */
  fence?: Lease | undefined
  /** The outcome is being recorded and published: operations find the Turn no longer running. */
  settling?: boolean
  /** The runner's fiber (`withdraw`). */
  fiber?: Fiber.Fiber<unknown, unknown> | undefined
}
