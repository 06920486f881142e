/**
 * The simulator's seeded PRNG: sfc32 (Small Fast Counter, 128-bit state), seeded from one 32-bit integer through
 * splitmix32 so nearby seeds give unrelated streams. Every choice the simulator makes (workload, faults, the
 * link's coin flips, the daemon's reconnect jitter) comes from a stream of this generator, so a schedule is a pure
 * function of its seed.
 */
export interface Prng {
  /** A float in [0, 1). */
  readonly next: () => number
  /** An integer in [0, n) (0 when n <= 0). */
  readonly int: (n: number) => number
  /** An integer in [min, max]. */
  readonly between: (min: number, max: number) => number
  readonly pick: <A>(items: ReadonlyArray<A>) => A
  readonly chance: (p: number) => boolean
  /** An independent stream derived from this one (so adding draws to one consumer does not shift another). */
  readonly fork: () => Prng
}

const splitmix32 = (seed: number) => {
  let s = seed >>> 0
  return () => {
    s = (s + 0x9e3779b9) >>> 0
    let z = s
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return (z ^ (z >>> 16)) >>> 0
  }
}

export const make = (seed: number): Prng => {
  const init = splitmix32(seed)
  let a = init()
  let b = init()
  let c = init()
  let d = init()
  const u32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0
    d = (d + 1) >>> 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) >>> 0
    c = ((c << 21) | (c >>> 11)) >>> 0
    c = (c + t) >>> 0
    return t
  }
  for (let i = 0; i < 12; i++) u32()
  const next = () => u32() / 4294967296
  const int = (n: number) => (n <= 0 ? 0 : Math.floor(next() * n))
  return {
    next,
    int,
    between: (min, max) => min + int(max - min + 1),
    pick: (items) => items[int(items.length)]!,
    chance: (p) => next() < p,
    fork: () => make(u32())
  }
}
