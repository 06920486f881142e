/**
 * A small seeded pseudo-random generator (mulberry32) for deterministic property tests: the same seed gives the
 * same sequence on every run, so a failing case is reproducible from the seed printed by the test.
 */
export interface Random {
  /** A float in [0, 1). */
  readonly next: () => number
  /** An integer in [0, n). */
  readonly int: (n: number) => number
  readonly pick: <A>(items: ReadonlyArray<A>) => A
  readonly bool: (p?: number) => boolean
}

export const seeded = (seed: number): Random => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  return { next, int, pick: (items) => items[int(items.length)]!, bool: (p = 0.5) => next() < p }
}
