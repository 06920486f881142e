/**
 * Group commit (docs/store.md "Group commit"): writes of many callers (journal facts of every Turn) go through
 * one writer fiber that commits whatever is queued, up to `maxBatch` writes, in one transaction. Each caller's
 * `submit` returns only after the transaction holding its write committed: that commit is the write's
 * durability point, so an acknowledgement that waits for `submit` never precedes it.
 *
 * Flushing: a write joins the open batch (queued, not yet taken by the writer) while it holds fewer than
 * `maxBatch` writes (256 by default), else it opens the next one. The writer takes the first queued batch,
 * yields once (the next tick: writes submitted in the same turn of the scheduler join it), seals it and commits
 * it. No timer is involved: while a commit runs (an fsync under `synchronous=FULL`), new writes join the next
 * batch, so batches grow with load and a lone write waits for nothing but its own commit. A write is one callback
 * that the batch resumes when it is settled (issue 18: no `Deferred` or queue offer per write).
 *
 * Failure: when a batch of several writes fails, each of its writes is committed again alone, so one bad write
 * (a constraint, a fenced Turn) fails only its own caller; every other caller gets its own result. A caller
 * keeps its own retry policy (DurableWrites): a retried write is simply submitted again.
 *
 * Interruption: a caller interrupted while waiting does not withdraw its write (it may commit later); the
 * writer commits uninterruptibly, so a batch is either committed and acknowledged or failed and reported. The
 * writer runs in the scope that made it; writes still queued when it closes fail their callers with a defect.
 */
import { Clock, Deferred, Effect, Exit, Queue, type Scope } from "effect"

export interface GroupCommitOptions {
  /** Most writes committed in one transaction (default 256). */
  readonly maxBatch?: number
}

/** What one batch commit saw: how many writes it held and when its first write was queued (for metrics and tests). */
export interface BatchInfo {
  readonly size: number
  /**
   * The committer's clock (the `Clock` of the scope that made it) when the batch's first write was queued (the
   * longest wait of its writes).
   */
  readonly openedAtNanos: bigint
}

export interface GroupCommit<W, E, A = void> {
  /**
   * Queues `write` and waits until the transaction holding it committed (or failed with its error). Succeeds with
   * what the commit answered for this write (`undefined` when the commit answers nothing).
   */
  readonly submit: (write: W) => Effect.Effect<A | undefined, E>
  /**
   * Queues `write` at once and succeeds with the wait for its commit (what `submit` waits for). Writes queued after
   * it, by any caller, are committed in the same transaction or a later one (a Turn's creation, then its runner's
   * first append: `Turns.ts`).
   */
  readonly enqueue: (write: W) => Effect.Effect<Effect.Effect<A | undefined, E>>
}

/**
 * The writes of one batch and their callers' resumptions (no `Deferred` per write or per batch): while a batch is
 * open (queued, not yet taken by the writer) new writes join it. When the batch is settled, each caller is resumed
 * with its own result: success, or the failure of its write committed alone after the batch failed.
 */
interface Batch<W, E, A> {
  readonly writes: Array<W>
  readonly waiters: Array<(result: Effect.Effect<A | undefined, E>) => void>
  readonly openedAtNanos: bigint
}

/**
 * The default batch size (issue 18). Under `synchronous=FULL` a commit costs one fsync (about 7 ms on the CI
 * disks) plus a few µs per row, so a batch of 256 appends acknowledges its writes barely later than one of 64
 * while carrying 4× the facts per fsync; it matches the 256 rows of one journal INSERT (`JournalCommit.ts`).
 * Batches only grow this large when that many appends wait (no timer), so a lone append still waits only for its
 * own commit.
 */
export const defaultMaxBatch = 256

/** The resumption of a write the commit answered nothing for (one shared value: no allocation per write). */
const answeredNothing = Effect.void as Effect.Effect<undefined>

/**
 * Makes a group committer over `commit`, which must write every given write in one transaction (all or none).
 * `commit` may answer one value per write, in the writes' order (rows a write's statements returned, issue 18: a
 * Turn's settle), which that write's `submit` succeeds with. The writer fiber lives in the caller's scope.
 */
export const make = <W, E, A = void>(
  commit: (writes: ReadonlyArray<W>, info: BatchInfo) => Effect.Effect<ReadonlyArray<A | undefined> | void, E>,
  options: GroupCommitOptions = {}
): Effect.Effect<GroupCommit<W, E, A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const maxBatch = Math.max(1, Math.floor(options.maxBatch ?? defaultMaxBatch))
    // The clock of the scope that made the committer, read once (issue 18: no `clockWith` effect per write).
    const clock = yield* Clock.Clock
    const queue = yield* Queue.unbounded<Batch<W, E, A>>()
    /** The batch new writes join: queued, not yet taken by the writer, not full. */
    let open: Batch<W, E, A> | undefined

    // Generator functions made once per committer, not per batch (docs/performance.md, "generators").
    const commitBatch = Effect.fnUntraced(function* (batch: Batch<W, E, A>) {
      const exit = yield* Effect.exit(commit(batch.writes, { size: batch.writes.length, openedAtNanos: batch.openedAtNanos }))
      if (Exit.isSuccess(exit)) {
        const answers = exit.value
        if (answers === undefined) for (const resume of batch.waiters) resume(answeredNothing)
        else batch.waiters.forEach((resume, i) => resume(Effect.succeed(answers[i])))
      } else if (batch.writes.length === 1) {
        batch.waiters[0]!(Effect.failCause(exit.cause))
      } else {
        // The batch failed: commit each write alone, so only a write that fails by itself fails its caller. Every
        // caller is resumed once all of them are settled (as with one completion for the batch).
        const results: Array<Effect.Effect<A | undefined, E>> = []
        for (const write of batch.writes) {
          const alone = yield* Effect.exit(commit([write], { size: 1, openedAtNanos: batch.openedAtNanos }))
          results.push(Exit.isSuccess(alone) ? Effect.succeed(alone.value === undefined ? undefined : alone.value[0]) : Effect.failCause(alone.cause))
        }
        batch.waiters.forEach((resume, i) => resume(results[i]!))
      }
    })

    const sealAndCommit = Effect.fnUntraced(function* (batch: Batch<W, E, A>) {
      yield* Effect.yieldNow
      if (open === batch) open = undefined // sealed: later writes open the next batch
      yield* commitBatch(batch)
    })

    const writer = Effect.gen(function* () {
      while (true) {
        const batch = yield* Queue.take(queue)
        // From here on a taken batch is always settled, even when the scope closes meanwhile.
        yield* Effect.uninterruptible(sealAndCommit(batch))
      }
    })

    let closed = false
    const closedDefect = () => Effect.die(new Error("group commit closed"))
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        closed = true
        open = undefined
        const left = yield* Queue.clear(queue)
        for (const batch of left) for (const resume of batch.waiters) resume(closedDefect())
      }))
    yield* Effect.forkScoped(writer)

    /** The write joins the open batch or opens the next one; `resume` is called when that batch is settled. */
    const push = (write: W, resume: (result: Effect.Effect<A | undefined, E>) => void) => {
      if (closed) {
        resume(closedDefect())
        return
      }
      const joined = open
      if (joined !== undefined && joined.writes.length < maxBatch) {
        joined.writes.push(write)
        joined.waiters.push(resume)
        return
      }
      const batch: Batch<W, E, A> = { writes: [write], waiters: [resume], openedAtNanos: clock.currentTimeNanosUnsafe() }
      open = batch
      Queue.offerUnsafe(queue, batch)
    }

    return {
      // One callback per write (issue 18: the fewest steps per fact).
      submit: (write: W) => Effect.callback<A | undefined, E>((resume) => push(write, resume)),
      enqueue: (write: W) =>
        Effect.map(Deferred.make<A | undefined, E>(), (committed) => {
          push(write, (result) => Deferred.doneUnsafe(committed, result))
          return Deferred.await(committed)
        })
    }
  })
