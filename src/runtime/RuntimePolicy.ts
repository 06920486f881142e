/**
 * Local resource policy of the daemon (not wire facts): capacity bounds, idle Executor expiry and the cleanup
 * retry policy. Protocol constants (admission expiry, receipt budgets, record bounds) stay in `proto/Limits`;
 * these knobs come from configuration with defaults, and tests override them with `layer(…)`, never with
 * module variables.
 */
import { Context, Duration, Layer, Schedule } from "effect"

export interface RuntimePolicyShape {
  /** Active preparations and executions, counting closing or uncertain resources until confirmed (default 4). */
  readonly maxActive: number
  /** Idle retained Executors (default 16); an Executor that becomes idle beyond it is closed instead. */
  readonly maxIdleExecutors: number
  /** An idle Executor is closed after this long without a new admission (default 10 minutes). */
  readonly idleExecutorTtl: Duration.Duration
  /** Bound on one native close attempt; a timeout counts as a failed attempt, never as success (default 10 s). */
  readonly closeAttemptTimeout: Duration.Duration
  /** Delays between failed close attempts: 500 ms growing by 1.5, capped at 5 s, forever. */
  readonly cleanupBackoff: Schedule.Schedule<unknown, unknown>
  /**
   * How long an ended Run's input receipts still answer a repeated input id (default 5 minutes, the admission
   * lifetime: longer than any Core receipt budget; docs/wire-decisions.md R14).
   */
  readonly endedRunReceiptRetention: Duration.Duration
  /** Ended Runs whose input receipts are retained per connection (default 64; the oldest is dropped first). */
  readonly maxEndedRunReceipts: number
}

export const defaultCleanupBackoff: Schedule.Schedule<unknown, unknown> = Schedule.min([
  Schedule.exponential("500 millis", 1.5),
  Schedule.spaced("5 seconds")
])

export const defaults: RuntimePolicyShape = {
  maxActive: 4,
  maxIdleExecutors: 16,
  idleExecutorTtl: Duration.minutes(10),
  closeAttemptTimeout: Duration.seconds(10),
  cleanupBackoff: defaultCleanupBackoff,
  endedRunReceiptRetention: Duration.minutes(5),
  maxEndedRunReceipts: 64
}

export class RuntimePolicy extends Context.Service<RuntimePolicy, RuntimePolicyShape>()("agentwire/runtime/RuntimePolicy") {
  static readonly layer = (overrides: Partial<RuntimePolicyShape> = {}) =>
    Layer.succeed(RuntimePolicy, RuntimePolicy.of({ ...defaults, ...overrides }))
}
