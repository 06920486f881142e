/**
 * A `Map` for long-lived owners whose entries come and go (one per Turn, per request, per deadline): after every
 * `deletesPerCopy` deletes it moves its entries to a new `Map`, so its tables stay young.
 *
 * Why (docs/performance.md, "generators"): a V8 `Map` that lives long enough to be promoted keeps its hash tables in
 * old space; each rehash leaves the replaced table behind, dead but still pointing at the entries it held, and a
 * scavenge treats every old-to-young pointer as a root. So the entries removed since, with everything they hold,
 * survive scavenges until the next full collection. A `Map` replaced after a few dozen deletes is collected young.
 *
 * Iteration is in insertion order, as `Map`'s (a copy keeps the order), and sees what is set or deleted during it, as
 * `Map`'s does: no copy is made while an iteration is open (an iteration that runs to its end or is left with
 * `break`, `return` or a throw closes; the rare paths that iterate use `for…of` or a spread).
 */
export class FreshMap<K, V> implements Iterable<[K, V]> {
  private map = new Map<K, V>()
  private deletes = 0
  private iterating = 0
  constructor(private readonly deletesPerCopy = 32) {}

  get size(): number {
    return this.map.size
  }

  get(key: K): V | undefined {
    return this.map.get(key)
  }

  has(key: K): boolean {
    return this.map.has(key)
  }

  set(key: K, value: V): this {
    this.map.set(key, value)
    return this
  }

  /** True when `key` was there (as `Map.delete`). */
  delete(key: K): boolean {
    if (!this.map.delete(key)) return false
    if (++this.deletes >= this.deletesPerCopy && this.iterating === 0) {
      this.deletes = 0
      this.map = new Map(this.map)
    }
    return true
  }

  clear(): void {
    this.deletes = 0
    this.map.clear()
  }

  keys(): Generator<K, void, undefined> {
    return this.guarded(this.map.keys())
  }

  values(): Generator<V, void, undefined> {
    return this.guarded(this.map.values())
  }

  entries(): Generator<[K, V], void, undefined> {
    return this.guarded(this.map.entries())
  }

  [Symbol.iterator](): Generator<[K, V], void, undefined> {
    return this.guarded(this.map.entries())
  }

  /** Iterates `it` (over the current map) with copies held off until the iteration closes. */
  private *guarded<A>(it: MapIterator<A>): Generator<A, void, undefined> {
    this.iterating++
    try {
      yield* it
    } finally {
      this.iterating--
    }
  }
}
