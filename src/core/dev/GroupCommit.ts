/**
 * Group commit (docs/store.md "Group commit"): writes of many callers (journal facts of every Turn) go through
 * one writer fiber that commits whatever is queued, up to `maxBatch` writes, in one transaction. Each caller's
 * `submit` returns only after the transaction holding its write committed: that commit is the write's
 * durability point, so an acknowledgement that waits for `submit` never precedes it.
 *
 * Flushing: the writer takes the first queued write, yields once (the next tick: writes submitted in the same
 * turn of the scheduler join it), then takes everything queued up to `maxBatch` (64 by default). No timer is
 * involved: while a commit runs (an fsync under `synchronous=FULL`), new writes queue and form the next batch,
 * so batches grow with load and a lone write waits for nothing but its own commit.
 *
 * Failure: when a batch of several writes fails, each of its writes is committed again alone, so one bad write
 * (a constraint, a fenced Turn) fails only its own caller; every other caller gets its own result. A caller
 * keeps its own retry policy (DurableWrites): a retried write is simply submitted again.
 *
 * Interruption: a caller interrupted while waiting does not withdraw its write (it may commit later); the
 * writer commits uninterruptibly, so a batch is either committed and acknowledged or failed and reported. The
 * writer runs in the scope that made it; writes still queued when it closes fail their callers with a defect.
 */
import { Deferred, Effect, Exit, Option, Queue, type Scope } from "effect"

export interface GroupCommitOptions {
  /** Most writes committed in one transaction (default 64). */
  readonly maxBatch?: number
}

/** What one batch commit saw: how many writes it held (for metrics and tests). */
export interface BatchInfo {
  readonly size: number
}

export interface GroupCommit<W, E> {
  /** Queues `write` and waits until the transaction holding it committed (or failed with its error). */
  readonly submit: (write: W) => Effect.Effect<void, E>
}

interface Pending<W, E> {
  readonly write: W
  readonly done: Deferred.Deferred<void, E>
}

/** The default batch size: the same 64 rows the raw-baseline measurement uses (issue 18). */
export const defaultMaxBatch = 64

/**
 * Makes a group committer over `commit`, which must write every given write in one transaction (all or none).
 * The writer fiber lives in the caller's scope.
 */
export const make = <W, E>(
  commit: (writes: ReadonlyArray<W>, info: BatchInfo) => Effect.Effect<void, E>,
  options: GroupCommitOptions = {}
): Effect.Effect<GroupCommit<W, E>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const maxBatch = Math.max(1, Math.floor(options.maxBatch ?? defaultMaxBatch))
    const queue = yield* Queue.unbounded<Pending<W, E>>()

    const settle = (batch: ReadonlyArray<Pending<W, E>>, exit: Exit.Exit<void, E>) =>
      Effect.forEach(batch, (p) => Deferred.done(p.done, exit), { discard: true })

    const commitBatch = (batch: ReadonlyArray<Pending<W, E>>) =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(commit(batch.map((p) => p.write), { size: batch.length }))
        if (Exit.isSuccess(exit) || batch.length === 1) return yield* settle(batch, exit)
        // The batch failed: commit each write alone, so only a write that fails by itself fails its caller.
        for (const pending of batch) {
          yield* settle([pending], yield* Effect.exit(commit([pending.write], { size: 1 })))
        }
      })

    const writer = Effect.gen(function* () {
      while (true) {
        const first = yield* Queue.take(queue)
        // From here on a taken write is always settled, even when the scope closes meanwhile.
        yield* Effect.uninterruptible(Effect.gen(function* () {
          yield* Effect.yieldNow
          const batch = [first]
          while (batch.length < maxBatch) {
            const next = yield* Queue.poll(queue)
            if (Option.isNone(next)) break
            batch.push(next.value)
          }
          yield* commitBatch(batch)
        }))
      }
    })

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const left = yield* Queue.clear(queue)
        yield* Effect.forEach(left, (p) => Deferred.die(p.done, new Error("group commit closed")), { discard: true })
      }))
    yield* Effect.forkScoped(writer)

    return {
      submit: (write: W) =>
        Effect.gen(function* () {
          const done = yield* Deferred.make<void, E>()
          yield* Queue.offer(queue, { write, done })
          return yield* Deferred.await(done)
        })
    }
  })
